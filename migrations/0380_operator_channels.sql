-- Up Migration
-- Operator channels made through the API (/v3/operator-channels, `ferry notify channels`), beside the
-- ones FERRY_NOTIFY_CHANNELS configures (a configured name always wins, and is never stored here).
-- The secret is write-only: the API never returns it, and only the notification dispatcher reads it.
-- A webhook channel signs with its secret; a Slack-style channel's URL carries its own token.
CREATE TABLE operator_channels (
  id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name                   text NOT NULL UNIQUE,
  kind                   text NOT NULL CHECK (kind IN ('webhook', 'slack')),
  url                    text NOT NULL,
  secret                 text,
  rate_limit_per_minute  integer NOT NULL CHECK (rate_limit_per_minute BETWEEN 1 AND 10000),
  dedup_seconds          integer NOT NULL CHECK (dedup_seconds BETWEEN 0 AND 2592000),
  max_attempts           integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
  timeout_ms             integer NOT NULL CHECK (timeout_ms BETWEEN 100 AND 60000),
  enabled                boolean NOT NULL DEFAULT true,
  created_by             text NOT NULL,
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_by             text NOT NULL,
  updated_at             timestamptz NOT NULL DEFAULT now(),
  secret_set_at          timestamptz,
  CHECK (kind <> 'webhook' OR secret IS NOT NULL)
);

-- Down Migration
DROP TABLE IF EXISTS operator_channels;
