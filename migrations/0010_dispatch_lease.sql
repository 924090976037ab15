-- Up Migration
-- A dispatch claim carries a lease token: the claim writes it, and every later write of that
-- dispatch (PREPARED, SIGNED, the step that fails or defers it) requires it unchanged. A dispatcher
-- that stalled past the grace, whose node recovery released and another dispatcher claimed again,
-- finds a different token and its writes are refused. Cleared when the node goes back to READY.
ALTER TABLE request_nodes ADD COLUMN claim_token uuid;

-- Batched claims walk the dispatch states per request (one node in dispatch per request).
CREATE INDEX request_nodes_in_dispatch ON request_nodes (request_id)
  WHERE node_state IN ('PREPARING', 'AWAITING_SIGNATURE', 'SUBMITTING');

-- Down Migration
DROP INDEX IF EXISTS request_nodes_in_dispatch;
ALTER TABLE request_nodes DROP COLUMN IF EXISTS claim_token;
