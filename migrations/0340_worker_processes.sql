-- Up Migration
-- Workers per process and per network class (GET /v3/workers `processes`, `ferry workers`).
--   network_class  the deployment the process serves (FERRY_NETWORK_CLASS): separate deployments on
--                  one database keep separate baselines of which workers are expected to run;
--   live_actors    the movement actors the process's lease holder runs now (actor runtime only);
--   restarts       how often the supervisor restarted this sidecar worker in this process.
-- A process that stops cleanly marks its rows 'stopped'; one that dies leaves them to age.
ALTER TABLE worker_heartbeats
  ADD COLUMN network_class text NOT NULL DEFAULT 'default',
  ADD COLUMN live_actors integer,
  ADD COLUMN restarts integer NOT NULL DEFAULT 0;

CREATE INDEX worker_heartbeats_network_class ON worker_heartbeats (network_class, last_beat_at);

-- Down Migration
DROP INDEX IF EXISTS worker_heartbeats_network_class;
ALTER TABLE worker_heartbeats
  DROP COLUMN IF EXISTS restarts,
  DROP COLUMN IF EXISTS live_actors,
  DROP COLUMN IF EXISTS network_class;
