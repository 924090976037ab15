-- Up Migration
-- Template proposals (src/machines/template-proposal-machine.ts, src/actors/template-proposals.ts).
-- A changed template is a proposal first; only a FINALIZED proposal writes a template version, so
-- plan_templates / template_versions keep holding live versions only. The row's columns are the
-- proposal machine's snapshot (state and context); every change is also a row of `transitions`
-- (entity_type 'template_proposal', request_id NULL), so the log replays through the machine.
CREATE TABLE template_proposals (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  template_key       text NOT NULL CHECK (template_key ~ '^[a-z0-9][a-z0-9_.-]{0,127}$'),
  -- The live version when the proposal was made (0: the template had none); the diff's base.
  base_version       integer NOT NULL DEFAULT 0,
  graph_hash         text NOT NULL,
  definition         jsonb NOT NULL,
  machine_id         text NOT NULL,
  machine_version    text NOT NULL,
  proposal_state     text NOT NULL,
  row_version        integer NOT NULL DEFAULT 0,
  proposed_by        text NOT NULL,
  -- Installed by Ferry itself (demo, sandbox): finalized at once, with an audit event saying so.
  system             boolean NOT NULL DEFAULT false,
  review_expires_at  timestamptz NOT NULL,
  challenge_seconds  integer NOT NULL CHECK (challenge_seconds >= 0),
  approved_by        text,
  approved_at        timestamptz,
  challenge_ends_at  timestamptz,
  decided_by         text,
  reason             text,
  -- The template version the finalization wrote.
  finalized_version  integer,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now()
);
-- One open proposal per template: a second change waits until the first is decided or withdrawn.
CREATE UNIQUE INDEX template_proposals_one_open ON template_proposals (template_key)
  WHERE proposal_state IN ('PROPOSED', 'APPROVED');
CREATE INDEX template_proposals_review_due ON template_proposals (review_expires_at) WHERE proposal_state = 'PROPOSED';
CREATE INDEX template_proposals_challenge_due ON template_proposals (challenge_ends_at) WHERE proposal_state = 'APPROVED';
CREATE INDEX template_proposals_by_key ON template_proposals (template_key, created_at DESC);

ALTER TABLE transitions DROP CONSTRAINT transitions_entity_type_check;
ALTER TABLE transitions ADD CONSTRAINT transitions_entity_type_check
  CHECK (entity_type IN ('request', 'node', 'template_proposal'));
ALTER TABLE transitions ALTER COLUMN request_id DROP NOT NULL;
ALTER TABLE transitions ADD CONSTRAINT transitions_request_id_present
  CHECK (request_id IS NOT NULL OR entity_type = 'template_proposal');

-- The stranded-callback sweep marks the rows it wrote a job for, so a run stopped by its budget
-- leaves the rest to the next run instead of finding the same first rows again.
ALTER TABLE callback_outbox ADD COLUMN stranded_requeued_at timestamptz;

-- Down Migration
ALTER TABLE callback_outbox DROP COLUMN IF EXISTS stranded_requeued_at;
ALTER TABLE transitions DISABLE TRIGGER transitions_append_only;
DELETE FROM transitions WHERE entity_type = 'template_proposal';
ALTER TABLE transitions ENABLE TRIGGER transitions_append_only;
ALTER TABLE transitions DROP CONSTRAINT IF EXISTS transitions_request_id_present;
ALTER TABLE transitions ALTER COLUMN request_id SET NOT NULL;
ALTER TABLE transitions DROP CONSTRAINT transitions_entity_type_check;
ALTER TABLE transitions ADD CONSTRAINT transitions_entity_type_check CHECK (entity_type IN ('request', 'node'));
DROP TABLE IF EXISTS template_proposals;
