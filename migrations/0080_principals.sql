-- Up Migration
-- A principal is who acts: a person or a service. Tokens are its credentials; four-eyes and quorum
-- count principals, so two tokens of one principal are one approver.
CREATE TABLE principals (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name         text NOT NULL UNIQUE,
  kind         text NOT NULL CHECK (kind IN ('person', 'service')),
  created_at   timestamptz NOT NULL DEFAULT now(),
  disabled_at  timestamptz
);

ALTER TABLE api_tokens
  ADD COLUMN principal_id uuid REFERENCES principals (id),
  ADD COLUMN expires_at   timestamptz;

-- Upgrades keep working: every existing token gets a principal of its own name (tokens that shared a
-- name over time, one revoked and its successor, were the same caller and share one principal). Who
-- they are cannot be known from a token, so they are recorded as persons; an operator can review them.
INSERT INTO principals (name, kind, created_at)
SELECT name, 'person', min(created_at) FROM api_tokens GROUP BY name;

UPDATE api_tokens t SET principal_id = p.id FROM principals p WHERE p.name = t.name;

ALTER TABLE api_tokens ALTER COLUMN principal_id SET NOT NULL;
CREATE INDEX api_tokens_principal ON api_tokens (principal_id);

-- Down Migration
DROP INDEX IF EXISTS api_tokens_principal;
ALTER TABLE api_tokens DROP COLUMN IF EXISTS expires_at, DROP COLUMN IF EXISTS principal_id;
DROP TABLE IF EXISTS principals;
