-- Up Migration
-- Callback delivery bookkeeping on top of callback_outbox:
--   payload_body      the exact bytes that are signed and POSTed, serialized once at creation, so every
--                     retry and redrive sends (and signs) the same body; payload stays for querying.
--   redrive_count     bumped by each redrive; with attempts it names one delivery attempt, which keys
--                     the attempt's queue job and fences out jobs left over from an earlier attempt.
--   lease_token,      a short in-progress lease taken before the HTTP call (no row lock is held while
--   lease_expires_at  the receiver answers); the result is written only by the holder of the token.
--   last_attempt_at   when the last attempt's outcome was recorded; next_attempt_at is computed from it.
ALTER TABLE callback_outbox
  ADD COLUMN payload_body text,
  ADD COLUMN redrive_count integer NOT NULL DEFAULT 0 CHECK (redrive_count >= 0),
  ADD COLUMN lease_token uuid,
  ADD COLUMN lease_expires_at timestamptz,
  ADD COLUMN last_attempt_at timestamptz;

UPDATE callback_outbox SET payload_body = payload::text WHERE payload_body IS NULL;
ALTER TABLE callback_outbox ALTER COLUMN payload_body SET NOT NULL;

ALTER TABLE callback_outbox
  ADD CONSTRAINT callback_outbox_attempts_check CHECK (attempts >= 0 AND max_attempts > 0);

-- Down Migration
ALTER TABLE callback_outbox DROP CONSTRAINT IF EXISTS callback_outbox_attempts_check;
ALTER TABLE callback_outbox
  DROP COLUMN IF EXISTS last_attempt_at,
  DROP COLUMN IF EXISTS lease_expires_at,
  DROP COLUMN IF EXISTS lease_token,
  DROP COLUMN IF EXISTS redrive_count,
  DROP COLUMN IF EXISTS payload_body;
