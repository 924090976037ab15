-- Up Migration
-- Credential proposals (src/machines/credential-proposal-machine.ts, src/services/credential-proposals.ts).
-- Through the API, creating a principal, giving a token to a principal other than oneself, and giving
-- any token of a role that can approve or administer are two-person operations: one admin proposes,
-- another confirms. Only a CONFIRMED proposal creates the principal or the token, in the transaction
-- of its transition. The row's columns are the machine's snapshot; every change is also a row of
-- `transitions` (entity_type 'credential_proposal', request_id NULL), so the log replays.
CREATE TABLE credential_proposals (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  operation          text NOT NULL CHECK (operation IN ('principal.create', 'token.create')),
  -- What is asked for (principal: name, kind; token: principal, name, role, expires_at). Never a secret:
  -- a token's secret is made at confirmation and shown only in the confirming answer.
  request            jsonb NOT NULL,
  -- The principal's name the change is about, for reading and filtering.
  subject            text NOT NULL,
  machine_id         text NOT NULL,
  machine_version    text NOT NULL,
  proposal_state     text NOT NULL,
  row_version        integer NOT NULL DEFAULT 0,
  proposed_by        text NOT NULL,
  review_expires_at  timestamptz NOT NULL,
  decided_by         text,
  decided_at         timestamptz,
  reason             text,
  -- What the confirmation created: the principal's or the token's id.
  result_id          uuid,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX credential_proposals_by_state ON credential_proposals (proposal_state, created_at DESC);

ALTER TABLE transitions DROP CONSTRAINT transitions_entity_type_check;
ALTER TABLE transitions ADD CONSTRAINT transitions_entity_type_check
  CHECK (entity_type IN ('request', 'node', 'template_proposal', 'credential_proposal'));
ALTER TABLE transitions DROP CONSTRAINT transitions_request_id_present;
ALTER TABLE transitions ADD CONSTRAINT transitions_request_id_present
  CHECK (request_id IS NOT NULL OR entity_type IN ('template_proposal', 'credential_proposal'));

-- Down Migration
ALTER TABLE transitions DISABLE TRIGGER transitions_append_only;
DELETE FROM transitions WHERE entity_type = 'credential_proposal';
ALTER TABLE transitions ENABLE TRIGGER transitions_append_only;
ALTER TABLE transitions DROP CONSTRAINT IF EXISTS transitions_request_id_present;
ALTER TABLE transitions ADD CONSTRAINT transitions_request_id_present
  CHECK (request_id IS NOT NULL OR entity_type = 'template_proposal');
ALTER TABLE transitions DROP CONSTRAINT transitions_entity_type_check;
ALTER TABLE transitions ADD CONSTRAINT transitions_entity_type_check
  CHECK (entity_type IN ('request', 'node', 'template_proposal'));
DROP TABLE IF EXISTS credential_proposals;
