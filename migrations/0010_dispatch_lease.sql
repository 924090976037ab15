-- Up Migration
-- A dispatch claim carries a lease token: the claim writes it, and every later write of that
-- dispatch (PREPARED, SIGNED, the step that fails or defers it) requires it unchanged. A dispatcher
-- that stalled past the grace, whose node recovery released and another dispatcher claimed again,
-- finds a different token and its writes are refused. Cleared when the node goes back to READY.
ALTER TABLE request_nodes ADD COLUMN claim_token uuid;

-- Batched claims walk active requests oldest first and probe each one's nodes by request id, in
-- the dispatch states (one node in dispatch per request) and the observable states.
CREATE INDEX request_nodes_in_dispatch ON request_nodes (request_id)
  WHERE node_state IN ('PREPARING', 'AWAITING_SIGNATURE', 'SUBMITTING');
-- The observable nodes are now found by request, never by time: the index by next_observe_at
-- goes, so the planner cannot prefer scanning it whole for every request over the probe.
DROP INDEX IF EXISTS request_nodes_observable;
CREATE INDEX request_nodes_observable_by_request ON request_nodes (request_id)
  WHERE node_state IN ('SUBMITTED', 'OBSERVING');

-- Down Migration
DROP INDEX IF EXISTS request_nodes_observable_by_request;
CREATE INDEX IF NOT EXISTS request_nodes_observable ON request_nodes (next_observe_at)
  WHERE node_state IN ('SUBMITTED', 'OBSERVING');
DROP INDEX IF EXISTS request_nodes_in_dispatch;
ALTER TABLE request_nodes DROP COLUMN IF EXISTS claim_token;
