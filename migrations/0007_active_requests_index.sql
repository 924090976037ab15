-- Up Migration
-- The dispatcher and observer walk active requests oldest first; with most requests finished, a
-- partial index keeps that walk proportional to the active ones, not to the whole history.
CREATE INDEX movement_requests_active ON movement_requests (created_at, id)
  WHERE request_state IN ('APPROVED', 'EXECUTING');

-- Down Migration
DROP INDEX IF EXISTS movement_requests_active;
