-- Up Migration
-- Registry drift (verify_drift, docs/operations.md "Registry drift") raises an attention event when
-- an episode opens, one per episode (source_key 'registry_drift:<drift id>'), so the operator
-- channels hear of it like of any other condition that needs a person.
ALTER TABLE attention_events DROP CONSTRAINT attention_events_kind_check;
ALTER TABLE attention_events ADD CONSTRAINT attention_events_kind_check
  CHECK (kind IN ('manual_intervention', 'node_failed_after_side_effect', 'drift', 'signer_identity_mismatch',
                  'balance_stale', 'callback_dlq', 'waiting_too_long', 'ccip_stranded', 'registry_drift'));

-- Down Migration
DELETE FROM attention_events WHERE kind = 'registry_drift';
ALTER TABLE attention_events DROP CONSTRAINT attention_events_kind_check;
ALTER TABLE attention_events ADD CONSTRAINT attention_events_kind_check
  CHECK (kind IN ('manual_intervention', 'node_failed_after_side_effect', 'drift', 'signer_identity_mismatch',
                  'balance_stale', 'callback_dlq', 'waiting_too_long', 'ccip_stranded'));
