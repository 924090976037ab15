-- Up Migration
-- Leases per movement for the actor runtime (FERRY_RUNTIME=actors, docs/actor-runtime.md).
--   lease_owner       the holding process's runtime id, or null;
--   lease_epoch       incremented on every acquisition (an acquisition also moves write_version, so
--                     rows an earlier holder kept are fenced out of its next write);
--   lease_expires_at  when another process may take the movement;
--   next_work_at      the earliest time any node of the movement is due (a READY node's
--                     dispatch_after, a SUBMITTED or OBSERVING node's next_observe_at), null when
--                     none is; written by the statement that writes the nodes (group-commit.ts).
ALTER TABLE movement_requests
  ADD COLUMN lease_owner text,
  ADD COLUMN lease_epoch bigint NOT NULL DEFAULT 0,
  ADD COLUMN lease_expires_at timestamptz,
  ADD COLUMN next_work_at timestamptz;

-- Movements already running when this migration runs have work now (their next write sets it).
UPDATE movement_requests SET next_work_at = now() WHERE request_state IN ('APPROVED', 'EXECUTING');

-- What the lease holder scans: only movements with work, in due order, whatever the history.
CREATE INDEX movement_requests_next_work ON movement_requests (next_work_at)
  WHERE request_state IN ('APPROVED', 'EXECUTING') AND next_work_at IS NOT NULL;

-- A group write that would be partial (a movement fenced out, or a row not at the version read)
-- raises this, so the one statement writes all of its rows or none, in autocommit as in a transaction.
CREATE FUNCTION ferry_write_refused(detail text) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ferry write refused: %', detail USING ERRCODE = 'FW001';
END
$$;

-- Down Migration
DROP FUNCTION IF EXISTS ferry_write_refused(text);
DROP INDEX IF EXISTS movement_requests_next_work;
ALTER TABLE movement_requests
  DROP COLUMN IF EXISTS next_work_at,
  DROP COLUMN IF EXISTS lease_expires_at,
  DROP COLUMN IF EXISTS lease_epoch,
  DROP COLUMN IF EXISTS lease_owner;
