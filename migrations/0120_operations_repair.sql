-- Up Migration
-- Reconciliation with provider evidence, manual intervention and its resolutions (docs/operations.md).

-- When reconciliation last asked the node's provider about its current attempt (not a state:
-- bookkeeping of the sweep, like movement_requests.reconciled_at).
ALTER TABLE request_nodes ADD COLUMN provider_checked_at timestamptz;
-- The executor said automatic recovery is impossible (manual_intervention_required): part of the
-- node machine's context, written only by the durable transition function.
ALTER TABLE request_nodes ADD COLUMN manual_intervention_required boolean NOT NULL DEFAULT false;
CREATE INDEX request_nodes_settled_recent ON request_nodes (updated_at)
  WHERE node_state IN ('COMPLETED', 'FAILED', 'UNKNOWN');

-- What reconciliation found when it compared a node's stored state with its provider's answer.
-- One row per node, attempt and class; seen again, its last_seen_at moves.
CREATE TABLE reconciliation_drifts (
  id              bigserial PRIMARY KEY,
  request_id      uuid NOT NULL REFERENCES movement_requests(id),
  request_node_id uuid NOT NULL REFERENCES request_nodes(id),
  node_key        text NOT NULL,
  attempt_no      integer NOT NULL,
  drift_class     text NOT NULL CHECK (drift_class IN ('completed_but_provider_failed', 'failed_but_provider_completed', 'unknown_but_provider_knows')),
  stored_state    text NOT NULL,
  provider_state  text NOT NULL,
  evidence        jsonb NOT NULL DEFAULT '{}',
  detected_at     timestamptz NOT NULL DEFAULT now(),
  last_seen_at    timestamptz NOT NULL DEFAULT now(),
  repaired_at     timestamptz,
  repaired_by     text,
  UNIQUE (request_node_id, attempt_no, drift_class)
);
CREATE INDEX reconciliation_drifts_open ON reconciliation_drifts (detected_at) WHERE repaired_at IS NULL;

-- An operator's proposed resolution of a node that needs a person; a second principal confirms it,
-- and only then is it applied through the node machine.
CREATE TABLE node_resolutions (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  request_id      uuid NOT NULL REFERENCES movement_requests(id),
  request_node_id uuid NOT NULL REFERENCES request_nodes(id),
  node_key        text NOT NULL,
  attempt_no      integer NOT NULL,
  resolution      text NOT NULL CHECK (resolution IN ('complete', 'fail', 'retry')),
  provider_ref    text,
  reason          text NOT NULL,
  evidence        jsonb NOT NULL DEFAULT '{}',
  status          text NOT NULL DEFAULT 'proposed' CHECK (status IN ('proposed', 'applied', 'refused')),
  proposed_by     text NOT NULL,
  proposed_at     timestamptz NOT NULL DEFAULT now(),
  confirmed_by    text,
  confirmed_at    timestamptz,
  refusal         text
);
-- One open proposal per node at a time.
CREATE UNIQUE INDEX node_resolutions_one_open ON node_resolutions (request_node_id) WHERE status = 'proposed';

-- Workers at a glance (GET /v3/workers, `ferry workers`): each process seeds a row per worker at
-- start, with its kind, whether this configuration enables it, and its interval; runs update it.
ALTER TABLE worker_heartbeats ADD COLUMN kind text NOT NULL DEFAULT 'loop' CHECK (kind IN ('loop', 'queue', 'sweep'));
ALTER TABLE worker_heartbeats ADD COLUMN enabled boolean NOT NULL DEFAULT true;
ALTER TABLE worker_heartbeats ADD COLUMN interval_seconds double precision;
ALTER TABLE worker_heartbeats ADD COLUMN last_run_at timestamptz;

-- Down Migration
ALTER TABLE worker_heartbeats DROP COLUMN IF EXISTS last_run_at;
ALTER TABLE worker_heartbeats DROP COLUMN IF EXISTS interval_seconds;
ALTER TABLE worker_heartbeats DROP COLUMN IF EXISTS enabled;
ALTER TABLE worker_heartbeats DROP COLUMN IF EXISTS kind;
DROP TABLE IF EXISTS node_resolutions;
DROP TABLE IF EXISTS reconciliation_drifts;
DROP INDEX IF EXISTS request_nodes_settled_recent;
ALTER TABLE request_nodes DROP COLUMN IF EXISTS manual_intervention_required;
ALTER TABLE request_nodes DROP COLUMN IF EXISTS provider_checked_at;
