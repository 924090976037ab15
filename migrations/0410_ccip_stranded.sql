-- Up Migration
-- The CCIP lane's stranded-send reaper (ccip_stranded_reaper, docs/ccip-lane.md "Stranded sends"):
-- a CCIP send whose delivery has not resolved past ccip.stranded_after_seconds is an attention
-- event of its own kind, recorded once per delivery node (source_key 'ccip_stranded:<node id>').
ALTER TABLE attention_events DROP CONSTRAINT attention_events_kind_check;
ALTER TABLE attention_events ADD CONSTRAINT attention_events_kind_check
  CHECK (kind IN ('manual_intervention', 'node_failed_after_side_effect', 'drift', 'signer_identity_mismatch',
                  'balance_stale', 'callback_dlq', 'waiting_too_long', 'ccip_stranded'));

-- Down Migration
DELETE FROM attention_events WHERE kind = 'ccip_stranded';
ALTER TABLE attention_events DROP CONSTRAINT attention_events_kind_check;
ALTER TABLE attention_events ADD CONSTRAINT attention_events_kind_check
  CHECK (kind IN ('manual_intervention', 'node_failed_after_side_effect', 'drift', 'signer_identity_mismatch',
                  'balance_stale', 'callback_dlq', 'waiting_too_long'));
