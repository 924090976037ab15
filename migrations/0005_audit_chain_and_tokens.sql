-- Up Migration
-- Audit events are a hash chain: once promoted, a row is never changed or removed by Ferry. The
-- trigger makes an accidental UPDATE/DELETE/TRUNCATE fail loudly; a table owner can still disable
-- it, which is why the chain itself (and an exported head) is what proves integrity.
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
  FOR EACH ROW EXECUTE FUNCTION ferry_forbid_change();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
  FOR EACH STATEMENT EXECUTE FUNCTION ferry_forbid_change();

-- An outbox row is written once and only ever deleted by the promoter that moved it into the chain.
CREATE TRIGGER audit_outbox_no_update BEFORE UPDATE ON audit_outbox
  FOR EACH ROW EXECUTE FUNCTION ferry_forbid_change();

-- Operators revoke tokens by name, so an active name must identify one token.
CREATE UNIQUE INDEX api_tokens_active_name ON api_tokens (name) WHERE revoked_at IS NULL;

-- Down Migration
DROP INDEX IF EXISTS api_tokens_active_name;
DROP TRIGGER IF EXISTS audit_outbox_no_update ON audit_outbox;
DROP TRIGGER IF EXISTS audit_events_no_truncate ON audit_events;
DROP TRIGGER IF EXISTS audit_events_append_only ON audit_events;
