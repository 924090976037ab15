-- Up Migration
-- Operator notifications (notification_dispatcher) and follow-up of movements waiting too long
-- (capital_transfer_followup).
--
-- attention_events: one row per thing an operator should hear about, each recorded once: its
-- source_key names what raised it (a transition, an audit event, a dead-lettered callback, a stale
-- balance reading, a signer's observed identity, a movement waiting in one state), so a rescan of
-- the same source writes nothing. dedup_key groups events that say the same thing (one movement's
-- manual intervention), for the channels' deduplication windows.
CREATE TABLE attention_events (
  id           bigserial PRIMARY KEY,
  kind         text NOT NULL CHECK (kind IN ('manual_intervention', 'node_failed_after_side_effect', 'drift',
                                             'signer_identity_mismatch', 'balance_stale', 'callback_dlq', 'waiting_too_long')),
  source_key   text NOT NULL UNIQUE,
  dedup_key    text NOT NULL,
  movement_id  uuid REFERENCES movement_requests(id),
  summary      text NOT NULL,
  details      jsonb NOT NULL DEFAULT '{}',
  created_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX attention_events_kind ON attention_events (kind, created_at);

-- How far the dispatcher has read the append-only sources it scans by id (transitions, audit_events).
CREATE TABLE notification_cursors (
  source      text PRIMARY KEY,
  last_id     bigint NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- One row per attention event per operator channel: its delivery lifecycle (the notification
-- delivery machine, src/machines/notification-delivery-machine.ts). 'suppressed': the channel had
-- the same dedup_key within its deduplication window, so it is not sent.
CREATE TABLE notification_deliveries (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  attention_id      bigint NOT NULL REFERENCES attention_events(id),
  channel           text NOT NULL,
  dedup_key         text NOT NULL,
  status            text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed', 'suppressed')),
  attempts          integer NOT NULL DEFAULT 0,
  max_attempts      integer NOT NULL CHECK (max_attempts > 0),
  next_attempt_at   timestamptz NOT NULL DEFAULT now(),
  last_attempt_at   timestamptz,
  last_error        text,
  last_status_code  integer,
  delivered_at      timestamptz,
  created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  UNIQUE (attention_id, channel)
);
CREATE INDEX notification_deliveries_due ON notification_deliveries (channel, next_attempt_at) WHERE status = 'pending';
CREATE INDEX notification_deliveries_dedup ON notification_deliveries (channel, dedup_key, created_at);
CREATE INDEX notification_deliveries_attempts ON notification_deliveries (channel, last_attempt_at);

-- Down Migration
DROP TABLE IF EXISTS notification_deliveries;
DROP TABLE IF EXISTS notification_cursors;
DROP TABLE IF EXISTS attention_events;
