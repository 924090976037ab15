-- Up Migration
-- When each movement was last replayed through its machines; the reconciliation sweep takes the
-- longest-unchecked first, so every movement is checked again in turn.
ALTER TABLE movement_requests ADD COLUMN reconciled_at timestamptz;
CREATE INDEX movement_requests_reconcile ON movement_requests (reconciled_at NULLS FIRST, updated_at);

-- Down Migration
DROP INDEX IF EXISTS movement_requests_reconcile;
ALTER TABLE movement_requests DROP COLUMN IF EXISTS reconciled_at;
