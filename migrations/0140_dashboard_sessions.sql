-- Up Migration
-- Sessions of the pg-boss dashboard (src/http/dashboard.ts). The browser's cookie holds a random
-- session id, never the API token; the table keeps only the id's SHA-256, so a leaked table opens
-- no session. A session is valid while it is not revoked (sign-out), not expired, and its token is
-- not revoked: the lookup joins api_tokens, so revoking the token ends every session it opened.
CREATE TABLE dashboard_sessions (
  id_hash     text PRIMARY KEY,
  token_id    uuid NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  revoked_at  timestamptz
);

CREATE INDEX dashboard_sessions_token ON dashboard_sessions (token_id);
CREATE INDEX dashboard_sessions_expires ON dashboard_sessions (expires_at);

-- Down Migration
DROP TABLE IF EXISTS dashboard_sessions;
