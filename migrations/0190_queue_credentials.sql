-- Up Migration
-- Queue credentials (src/services/queue-credentials.ts): a queued movement order is signed with an
-- Ed25519 key bound to one principal. Ferry keeps only the public key, so neither this table nor the
-- queue's job table holds anything that could sign an order; the private key is shown once, at
-- creation, like a token.
CREATE TABLE queue_credentials (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name          text NOT NULL,
  principal_id  uuid NOT NULL REFERENCES principals (id),
  -- The raw 32-byte Ed25519 public key, base64url.
  public_key    text NOT NULL CHECK (public_key ~ '^[A-Za-z0-9_-]{43}$'),
  created_at    timestamptz NOT NULL DEFAULT now(),
  revoked_at    timestamptz
);
CREATE UNIQUE INDEX queue_credentials_active_name ON queue_credentials (name) WHERE revoked_at IS NULL;
CREATE INDEX queue_credentials_principal ON queue_credentials (principal_id);

-- Down Migration
DROP TABLE IF EXISTS queue_credentials;
