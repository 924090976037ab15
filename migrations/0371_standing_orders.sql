-- Up Migration
-- Standing orders (docs/policy.md, "Standing orders"): an approved, bounded permission for routine
-- movements, and its runs. The order's columns are the standing order machine's snapshot
-- (src/machines/standing-order-machine.ts); every change is also a row of `transitions`
-- (entity_type 'standing_order').
CREATE TABLE standing_orders (
  id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name                text NOT NULL UNIQUE,
  -- What a run creates: the template and the intent's fixed fields (amount and destination are the run's).
  template_key        text NOT NULL,
  intent              jsonb NOT NULL,
  asset               text NOT NULL,
  -- Book entry names; a run goes to the first (the others are allowed alternatives).
  destinations        text[] NOT NULL,
  max_per_run         numeric NOT NULL,
  max_per_window      numeric NOT NULL,
  window_seconds      integer NOT NULL,
  -- {kind:'schedule', cron, time_zone, amount?} | {kind:'ceiling' | 'floor', ...}: see src/machines/standing-order-machine.ts.
  trigger             jsonb NOT NULL,
  expires_at          timestamptz NOT NULL,
  machine_id          text NOT NULL,
  machine_version     text NOT NULL,
  order_state         text NOT NULL,
  row_version         integer NOT NULL DEFAULT 0,
  proposed_by         text NOT NULL,
  -- How many distinct principals (never the proposer) must approve it: the policy's quorum for its max_per_run.
  required_approvals  integer NOT NULL CHECK (required_approvals >= 1),
  approvals           jsonb NOT NULL DEFAULT '[]',
  decided_by          text,
  reason              text,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now()
);
-- The sweep reads the orders that may run; nothing else when there are none.
CREATE INDEX standing_orders_active ON standing_orders (order_state) WHERE order_state = 'ACTIVE';

-- One row per schedule slot or trigger crossing: the unique key is what makes a run happen once,
-- whichever process (or restart) gets there first.
CREATE TABLE standing_order_runs (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  standing_order_id  uuid NOT NULL REFERENCES standing_orders (id),
  slot_key           text NOT NULL,
  amount             numeric,
  destination_entry  text,
  movement_id        uuid REFERENCES movement_requests (id),
  -- 'pending' (its movement not yet created: the next check carries it on), 'approved' (by the standing
  -- order), 'waiting' (for people), 'refused' (by the policy), 'skipped' (nothing to move at this slot).
  outcome            text NOT NULL CHECK (outcome IN ('pending', 'approved', 'waiting', 'refused', 'skipped')),
  error_code         text,
  error_detail       text,
  -- Set while one runner carries a pending run on, so a second runner leaves it alone.
  leased_until       timestamptz,
  created_at         timestamptz NOT NULL DEFAULT now(),
  UNIQUE (standing_order_id, slot_key)
);
CREATE INDEX standing_order_runs_history ON standing_order_runs (standing_order_id, created_at DESC);

ALTER TABLE transitions DROP CONSTRAINT transitions_entity_type_check;
ALTER TABLE transitions ADD CONSTRAINT transitions_entity_type_check
  CHECK (entity_type IN ('request', 'node', 'template_proposal', 'credential_proposal', 'policy_proposal', 'standing_order'));
ALTER TABLE transitions DROP CONSTRAINT transitions_request_id_present;
ALTER TABLE transitions ADD CONSTRAINT transitions_request_id_present
  CHECK (request_id IS NOT NULL OR entity_type IN ('template_proposal', 'credential_proposal', 'policy_proposal', 'standing_order'));

-- Down Migration
ALTER TABLE transitions DISABLE TRIGGER transitions_append_only;
DELETE FROM transitions WHERE entity_type = 'standing_order';
ALTER TABLE transitions ENABLE TRIGGER transitions_append_only;
ALTER TABLE transitions DROP CONSTRAINT IF EXISTS transitions_request_id_present;
ALTER TABLE transitions ADD CONSTRAINT transitions_request_id_present
  CHECK (request_id IS NOT NULL OR entity_type IN ('template_proposal', 'credential_proposal', 'policy_proposal'));
ALTER TABLE transitions DROP CONSTRAINT transitions_entity_type_check;
ALTER TABLE transitions ADD CONSTRAINT transitions_entity_type_check
  CHECK (entity_type IN ('request', 'node', 'template_proposal', 'credential_proposal', 'policy_proposal'));
DROP TABLE IF EXISTS standing_order_runs;
DROP TABLE IF EXISTS standing_orders;
