-- Up Migration
-- Ferry's core data model: plan templates and their versions, movement requests and their nodes
-- (each a durable XState actor), the append-only transition log, artifacts, outboxes, registries.

CREATE EXTENSION IF NOT EXISTS pgcrypto;

CREATE TABLE plan_templates (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  template_key    text NOT NULL UNIQUE CHECK (template_key ~ '^[a-z0-9][a-z0-9_.-]{0,127}$'),
  description     text NOT NULL DEFAULT '',
  latest_version  integer NOT NULL DEFAULT 0,
  created_by      text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE template_versions (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  template_id     uuid NOT NULL REFERENCES plan_templates(id),
  version         integer NOT NULL CHECK (version > 0),
  graph_hash      text NOT NULL,
  risk_controls   jsonb NOT NULL DEFAULT '{}',
  definition      jsonb NOT NULL,
  created_by      text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (template_id, version),
  UNIQUE (template_id, graph_hash)
);

CREATE TABLE plan_nodes (
  id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  template_version_id uuid NOT NULL REFERENCES template_versions(id),
  node_key            text NOT NULL,
  node_kind           text NOT NULL CHECK (node_kind IN ('action', 'observe', 'manual_gate', 'compensation', 'post_action')),
  action_type         text NOT NULL,
  executor_binding    jsonb NOT NULL,
  signer_binding      jsonb,
  config              jsonb NOT NULL DEFAULT '{}',
  timeout_policy      jsonb NOT NULL DEFAULT '{}',
  position            integer NOT NULL,
  UNIQUE (template_version_id, node_key)
);

CREATE TABLE plan_edges (
  template_version_id uuid NOT NULL REFERENCES template_versions(id),
  from_node_key       text NOT NULL,
  to_node_key         text NOT NULL,
  PRIMARY KEY (template_version_id, from_node_key, to_node_key)
);

CREATE TABLE movement_requests (
  id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  template_version_id  uuid NOT NULL REFERENCES template_versions(id),
  template_key         text NOT NULL,
  template_version     integer NOT NULL,
  intent               jsonb NOT NULL,
  input_params         jsonb NOT NULL DEFAULT '{}',
  compiled_plan_hash   text NOT NULL,
  compiled_plan        jsonb NOT NULL,
  machine_id           text NOT NULL,
  machine_version      text NOT NULL,
  request_state        text NOT NULL,
  row_version          integer NOT NULL DEFAULT 0,
  approval_status      text NOT NULL DEFAULT 'pending' CHECK (approval_status IN ('pending', 'approved', 'rejected')),
  approval_quorum      integer NOT NULL DEFAULT 1 CHECK (approval_quorum > 0),
  approvals            jsonb NOT NULL DEFAULT '[]',
  decided_by           text,
  expires_at           timestamptz,
  current_frontier     jsonb NOT NULL DEFAULT '[]',
  callback_url         text,
  idempotency_key      text,
  request_fingerprint  text,
  created_by           text NOT NULL,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX movement_requests_idempotency ON movement_requests (created_by, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE INDEX movement_requests_state_created ON movement_requests (request_state, created_at);
CREATE INDEX movement_requests_template ON movement_requests (template_key, created_at);
CREATE INDEX movement_requests_pending_expiry ON movement_requests (expires_at)
  WHERE request_state = 'PENDING_APPROVAL';
CREATE INDEX movement_requests_created ON movement_requests (created_at, id);

CREATE TABLE request_nodes (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  request_id        uuid NOT NULL REFERENCES movement_requests(id),
  plan_node_id      uuid NOT NULL REFERENCES plan_nodes(id),
  node_key          text NOT NULL,
  node_kind         text NOT NULL,
  action_type       text NOT NULL,
  executor_binding  jsonb NOT NULL,
  signer_binding    jsonb,
  config            jsonb NOT NULL DEFAULT '{}',
  timeout_policy    jsonb NOT NULL DEFAULT '{}',
  predecessor_keys  text[] NOT NULL DEFAULT '{}',
  successor_keys    text[] NOT NULL DEFAULT '{}',
  retryable         boolean NOT NULL DEFAULT false,
  machine_id        text NOT NULL,
  machine_version   text NOT NULL,
  node_state        text NOT NULL,
  row_version       integer NOT NULL DEFAULT 0,
  attempt_no        integer NOT NULL DEFAULT 0,
  idempotency_key   text,
  provider_state    text,
  provider_refs     jsonb NOT NULL DEFAULT '{}',
  provider_ref_id   text,
  next_observe_at   timestamptz,
  last_observed_at  timestamptz,
  observe_count     integer NOT NULL DEFAULT 0,
  dispatch_after    timestamptz,
  started_at        timestamptz,
  error_code        text,
  error_detail      text,
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  UNIQUE (request_id, node_key)
);
-- Claim queries read only the claimable slices of this table.
CREATE INDEX request_nodes_ready ON request_nodes (request_id) WHERE node_state = 'READY';
CREATE INDEX request_nodes_observable ON request_nodes (next_observe_at)
  WHERE node_state IN ('SUBMITTED', 'OBSERVING');
CREATE INDEX request_nodes_recoverable ON request_nodes (updated_at)
  WHERE node_state IN ('UNKNOWN', 'SUBMITTING');
CREATE INDEX request_nodes_request ON request_nodes (request_id);

-- Append-only: one row per accepted event, numbered per entity without gaps (seq = row_version).
CREATE TABLE transitions (
  id               bigserial PRIMARY KEY,
  machine_id       text NOT NULL,
  machine_version  text NOT NULL,
  entity_type      text NOT NULL CHECK (entity_type IN ('request', 'node')),
  entity_id        uuid NOT NULL,
  request_id       uuid NOT NULL,
  node_key         text,
  seq              integer NOT NULL,
  from_state       text NOT NULL,
  to_state         text NOT NULL,
  event_type       text NOT NULL,
  event_payload    jsonb NOT NULL DEFAULT '{}',
  actor            text NOT NULL,
  at               timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (entity_id, seq)
);
CREATE INDEX transitions_request ON transitions (request_id, id);

CREATE OR REPLACE FUNCTION ferry_forbid_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END $$;
CREATE TRIGGER transitions_append_only BEFORE UPDATE OR DELETE ON transitions
  FOR EACH ROW EXECUTE FUNCTION ferry_forbid_change();

CREATE TABLE artifacts (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  request_id        uuid NOT NULL REFERENCES movement_requests(id),
  request_node_id   uuid NOT NULL REFERENCES request_nodes(id),
  attempt_no        integer NOT NULL,
  artifact_type     text NOT NULL,
  artifact_digest   text,
  content_format    text NOT NULL DEFAULT 'json',
  content_inline    text,
  content_uri       text,
  artifact_metadata jsonb NOT NULL DEFAULT '{}',
  created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX artifacts_node ON artifacts (request_node_id, created_at);

CREATE TABLE callback_outbox (
  id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  request_id          uuid NOT NULL REFERENCES movement_requests(id),
  event_type          text NOT NULL,
  node_key            text,
  callback_url        text NOT NULL,
  payload             jsonb NOT NULL,
  status              text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'dlq')),
  attempts            integer NOT NULL DEFAULT 0,
  max_attempts        integer NOT NULL DEFAULT 5,
  next_attempt_at     timestamptz NOT NULL DEFAULT now(),
  callback_timestamp  bigint NOT NULL,
  callback_nonce      text NOT NULL,
  last_error          text,
  last_status_code    integer,
  sent_at             timestamptz,
  created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX callback_outbox_pending ON callback_outbox (next_attempt_at, created_at) WHERE status = 'pending';
CREATE INDEX callback_outbox_request ON callback_outbox (request_id, created_at);
CREATE INDEX callback_outbox_status ON callback_outbox (status, created_at);

CREATE TABLE audit_outbox (
  id           bigserial PRIMARY KEY,
  actor        text NOT NULL,
  action       text NOT NULL,
  entity_type  text NOT NULL,
  entity_id    text,
  details      jsonb NOT NULL DEFAULT '{}',
  occurred_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- A hash chain: each event carries the hash of the one before it.
CREATE TABLE audit_events (
  id           bigserial PRIMARY KEY,
  outbox_id    bigint NOT NULL UNIQUE,
  actor        text NOT NULL,
  action       text NOT NULL,
  entity_type  text NOT NULL,
  entity_id    text,
  details      jsonb NOT NULL DEFAULT '{}',
  occurred_at  timestamptz NOT NULL,
  prev_hash    text NOT NULL,
  hash         text NOT NULL UNIQUE,
  promoted_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE worker_heartbeats (
  process_id    text NOT NULL,
  worker_name   text NOT NULL,
  hostname      text NOT NULL,
  pid           integer NOT NULL,
  group_name    text NOT NULL CHECK (group_name IN ('core', 'sidecar')),
  status        text NOT NULL,
  loop_runs     bigint NOT NULL DEFAULT 0,
  consecutive_errors integer NOT NULL DEFAULT 0,
  last_error    text,
  started_at    timestamptz NOT NULL DEFAULT now(),
  last_beat_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (process_id, worker_name)
);

CREATE TABLE executor_registry (
  executor_key            text PRIMARY KEY,
  lane                    text NOT NULL,
  status                  text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'orphan')),
  health_state            text NOT NULL DEFAULT 'unknown' CHECK (health_state IN ('up', 'down', 'unknown')),
  health_detail           jsonb NOT NULL DEFAULT '{}',
  last_health_checked_at  timestamptz,
  created_at              timestamptz NOT NULL DEFAULT now(),
  updated_at              timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE signer_registry (
  signer_key               text PRIMARY KEY,
  status                   text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'orphan')),
  health_state             text NOT NULL DEFAULT 'unknown' CHECK (health_state IN ('up', 'down', 'unknown')),
  health_detail            jsonb NOT NULL DEFAULT '{}',
  last_health_checked_at   timestamptz,
  observed_signer_address  text,
  expected_signer_address  text,
  expected_set_by          text,
  expected_set_at          timestamptz,
  created_at               timestamptz NOT NULL DEFAULT now(),
  updated_at               timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_tokens (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name          text NOT NULL,
  role          text NOT NULL CHECK (role IN ('viewer', 'requester', 'approver', 'operator', 'admin')),
  token_hash    text NOT NULL UNIQUE,
  created_at    timestamptz NOT NULL DEFAULT now(),
  last_used_at  timestamptz,
  revoked_at    timestamptz
);

-- Every submit the simulation lane performs, so tests can prove a side effect happened once.
CREATE TABLE sim_side_effects (
  id               bigserial PRIMARY KEY,
  request_node_id  uuid NOT NULL,
  attempt_no       integer NOT NULL,
  idempotency_key  text NOT NULL,
  executor_key     text NOT NULL,
  call             text NOT NULL,
  at               timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX sim_side_effects_key ON sim_side_effects (idempotency_key);

-- Down Migration
DROP TABLE IF EXISTS sim_side_effects, api_tokens, signer_registry, executor_registry, worker_heartbeats,
  audit_events, audit_outbox, callback_outbox, artifacts, transitions, request_nodes, movement_requests,
  plan_edges, plan_nodes, template_versions, plan_templates CASCADE;
DROP FUNCTION IF EXISTS ferry_forbid_change();
