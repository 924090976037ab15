-- Up Migration
-- Treasury policy (docs/policy.md; src/machines/policy-proposal-machine.ts, src/services/policy.ts):
-- the address book, the versioned rule set, the reviewed proposals that change either, and what
-- every movement records of the policy it was created under.

-- The address book: named destinations. Rows change only when a policy proposal is finalized.
CREATE TABLE address_book_entries (
  name         text PRIMARY KEY,
  -- The chain or venue the address belongs to ("ethereum", "base", "binance"), as the operator names it.
  network      text NOT NULL,
  address      text NOT NULL,
  -- The address as it is compared: 0x-hex addresses lowercased, anything else as written.
  address_key  text NOT NULL,
  -- The memo or tag a lane needs beside the address (a CEX network's memo), or null.
  tag          text,
  owner        text NOT NULL,
  kind         text NOT NULL CHECK (kind IN ('internal', 'external')),
  notes        text,
  -- 1 when created, +1 per finalized change.
  version      integer NOT NULL DEFAULT 1,
  -- The proposal whose finalization wrote the row as it is.
  proposal_id  uuid NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now()
);
-- One entry per destination: a movement's destination names at most one entry.
CREATE UNIQUE INDEX address_book_by_address ON address_book_entries (address_key, coalesce(tag, ''));

-- The rule set, one immutable row per version; the highest version is live. No row: no policy.
CREATE TABLE policy_rule_sets (
  version      integer PRIMARY KEY CHECK (version >= 1),
  rules        jsonb NOT NULL,
  limits       jsonb NOT NULL,
  proposal_id  uuid NOT NULL,
  proposed_by  text NOT NULL,
  approved_by  text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE TRIGGER policy_rule_sets_append_only BEFORE UPDATE OR DELETE ON policy_rule_sets
  FOR EACH ROW EXECUTE FUNCTION ferry_forbid_change();

-- Proposed changes of the book or of the rule set. The row's columns are the policy proposal
-- machine's snapshot; every change is also a row of `transitions` (entity_type 'policy_proposal').
CREATE TABLE policy_proposals (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  -- 'address_book': subject is the entry's name; 'rule_set': subject is 'rules'.
  subject_kind       text NOT NULL CHECK (subject_kind IN ('address_book', 'rule_set')),
  subject            text NOT NULL,
  -- What changes: {op: 'put', entry} | {op: 'remove', name} | {op: 'replace', base_version, rules, limits}.
  change             jsonb NOT NULL,
  machine_id         text NOT NULL,
  machine_version    text NOT NULL,
  proposal_state     text NOT NULL,
  row_version        integer NOT NULL DEFAULT 0,
  proposed_by        text NOT NULL,
  review_expires_at  timestamptz NOT NULL,
  challenge_seconds  integer NOT NULL CHECK (challenge_seconds >= 0),
  approved_by        text,
  approved_at        timestamptz,
  challenge_ends_at  timestamptz,
  decided_by         text,
  reason             text,
  -- What finalization wrote: the rule set's version, or the entry's version.
  result_version     integer,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now()
);
-- One open proposal per subject: decide or withdraw it before proposing another.
CREATE UNIQUE INDEX policy_proposals_one_open ON policy_proposals (subject_kind, subject)
  WHERE proposal_state IN ('PROPOSED', 'APPROVED');
CREATE INDEX policy_proposals_by_state ON policy_proposals (proposal_state, created_at DESC);

-- What each movement records of the policy at its creation (null on movements from before).
ALTER TABLE movement_requests
  ADD COLUMN policy_rule_set_version integer,
  ADD COLUMN policy_rule_id text,
  ADD COLUMN policy_action text,
  -- The intent's asset (upper case), amount and destination as the rules and limits read them.
  ADD COLUMN policy_asset text,
  ADD COLUMN policy_amount numeric,
  ADD COLUMN policy_destination text,
  ADD COLUMN policy_destination_entry text,
  -- Who may approve under the matching rule: {"principals": [names]} or null (any approver).
  ADD COLUMN policy_approvers jsonb;
-- The velocity sums read movements of one asset past approval.
CREATE INDEX movement_requests_velocity ON movement_requests (policy_asset, policy_destination)
  WHERE policy_asset IS NOT NULL
    AND request_state IN ('APPROVED', 'EXECUTING', 'WAITING_MANUAL_ACTION', 'MANUAL_INTERVENTION', 'COMPLETED');

ALTER TABLE transitions DROP CONSTRAINT transitions_entity_type_check;
ALTER TABLE transitions ADD CONSTRAINT transitions_entity_type_check
  CHECK (entity_type IN ('request', 'node', 'template_proposal', 'credential_proposal', 'policy_proposal'));
ALTER TABLE transitions DROP CONSTRAINT transitions_request_id_present;
ALTER TABLE transitions ADD CONSTRAINT transitions_request_id_present
  CHECK (request_id IS NOT NULL OR entity_type IN ('template_proposal', 'credential_proposal', 'policy_proposal'));

-- Down Migration
ALTER TABLE transitions DISABLE TRIGGER transitions_append_only;
DELETE FROM transitions WHERE entity_type = 'policy_proposal';
ALTER TABLE transitions ENABLE TRIGGER transitions_append_only;
ALTER TABLE transitions DROP CONSTRAINT IF EXISTS transitions_request_id_present;
ALTER TABLE transitions ADD CONSTRAINT transitions_request_id_present
  CHECK (request_id IS NOT NULL OR entity_type IN ('template_proposal', 'credential_proposal'));
ALTER TABLE transitions DROP CONSTRAINT transitions_entity_type_check;
ALTER TABLE transitions ADD CONSTRAINT transitions_entity_type_check
  CHECK (entity_type IN ('request', 'node', 'template_proposal', 'credential_proposal'));
DROP INDEX IF EXISTS movement_requests_velocity;
ALTER TABLE movement_requests
  DROP COLUMN policy_rule_set_version,
  DROP COLUMN policy_rule_id,
  DROP COLUMN policy_action,
  DROP COLUMN policy_asset,
  DROP COLUMN policy_amount,
  DROP COLUMN policy_destination,
  DROP COLUMN policy_destination_entry,
  DROP COLUMN policy_approvers;
DROP TABLE IF EXISTS policy_proposals;
DROP TABLE IF EXISTS policy_rule_sets;
DROP TABLE IF EXISTS address_book_entries;
