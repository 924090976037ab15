-- Up Migration
-- An idle audit promoter waits FERRY_AUDIT_PROMOTER_IDLE_INTERVAL_SECONDS between runs instead of
-- its 1 s interval, so a write to the outbox must say that there is work (src/sweeps/sweeps.ts,
-- "Idle chains"): every statement that inserts outbox rows sends one NOTIFY on ferry_audit_outbox,
-- delivered at commit (never for a rolled-back write), and PostgreSQL folds a transaction's
-- identical notifications into one. The workers' wake-up connection hears it and brings the
-- promoter's parked run forward. No extra statement for the writer: the trigger runs inside its INSERT.
CREATE FUNCTION ferry_audit_outbox_notify() RETURNS trigger
  LANGUAGE plpgsql
  AS $$
BEGIN
  PERFORM pg_notify('ferry_audit_outbox', '');
  RETURN NULL;
END
$$;

CREATE TRIGGER audit_outbox_notify AFTER INSERT ON audit_outbox
  FOR EACH STATEMENT EXECUTE FUNCTION ferry_audit_outbox_notify();

-- Down Migration
DROP TRIGGER IF EXISTS audit_outbox_notify ON audit_outbox;
DROP FUNCTION IF EXISTS ferry_audit_outbox_notify();
