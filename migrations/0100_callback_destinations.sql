-- Up Migration
-- Registered callback destinations. An operator registers a receiver once (name + URL); Ferry
-- generates its signing secret, and movements name the destination instead of carrying a raw URL.
-- Each destination signs with its own secret, so one receiver cannot forge callbacks to another.
CREATE TABLE callback_destinations (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name         text NOT NULL UNIQUE,
  url          text NOT NULL,
  status       text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
  created_by   text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  disabled_by  text,
  disabled_at  timestamptz,
  updated_at   timestamptz NOT NULL DEFAULT now()
);

-- A destination's signing secrets. The current one has expires_at NULL (at most one per
-- destination); a rotation gives the previous ones expires_at = the end of the overlap, and until
-- then deliveries carry a signature with each of them.
CREATE TABLE callback_destination_secrets (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  destination_id  uuid NOT NULL REFERENCES callback_destinations(id),
  secret          text NOT NULL,
  created_by      text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
  expires_at      timestamptz
);
CREATE UNIQUE INDEX callback_destination_secrets_current
  ON callback_destination_secrets (destination_id) WHERE expires_at IS NULL;
CREATE INDEX callback_destination_secrets_destination
  ON callback_destination_secrets (destination_id, created_at);

-- Which destination a movement and each of its callbacks report to (NULL: a raw callback_url,
-- signed with the instance secret as before).
ALTER TABLE movement_requests ADD COLUMN callback_destination_id uuid REFERENCES callback_destinations(id);
ALTER TABLE callback_outbox ADD COLUMN destination_id uuid REFERENCES callback_destinations(id);

-- Down Migration
ALTER TABLE callback_outbox DROP COLUMN IF EXISTS destination_id;
ALTER TABLE movement_requests DROP COLUMN IF EXISTS callback_destination_id;
DROP TABLE IF EXISTS callback_destination_secrets;
DROP TABLE IF EXISTS callback_destinations;
