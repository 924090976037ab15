-- Up Migration
-- Reconciliation finds the movements that changed since it last replayed them without reading the
-- history.
--
-- A movement is due when it was never reconciled, when its row changed since (reconciled_at <
-- updated_at), or when one of its nodes changed since. The last test was an EXISTS per movement,
-- so once every movement was reconciled (the steady state: fewer candidates than the batch) each
-- run walked the whole table and probed every movement's nodes: 490 ms with 100,000 finished
-- movements, every 30 s, growing with the history.
--
-- Each node now carries the time of the reconciliation that last covered it (markReconciled writes
-- the movement's and its nodes' reconciled_at together), so "changed since" is a test on the row
-- itself, and partial indexes hold exactly the rows that are due: the live ones and the few changed
-- since their last check. A settled, reconciled movement is in neither index.
ALTER TABLE request_nodes ADD COLUMN reconciled_at timestamptz;
UPDATE request_nodes n SET reconciled_at = r.reconciled_at
  FROM movement_requests r
 WHERE r.id = n.request_id AND r.reconciled_at IS NOT NULL;

CREATE INDEX request_nodes_unreconciled ON request_nodes (request_id)
  WHERE reconciled_at IS NULL OR reconciled_at < updated_at;
CREATE INDEX movement_requests_unreconciled ON movement_requests (reconciled_at NULLS FIRST, updated_at)
  WHERE reconciled_at IS NULL OR reconciled_at < updated_at;
DROP INDEX IF EXISTS movement_requests_reconcile;

-- Down Migration
CREATE INDEX IF NOT EXISTS movement_requests_reconcile ON movement_requests (reconciled_at NULLS FIRST, updated_at);
DROP INDEX IF EXISTS movement_requests_unreconciled;
DROP INDEX IF EXISTS request_nodes_unreconciled;
ALTER TABLE request_nodes DROP COLUMN IF EXISTS reconciled_at;
