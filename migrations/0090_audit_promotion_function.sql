-- Up Migration
-- Promotion of the audit outbox into the hash chain, as a function owned by the migrations' role.
--
-- Ferry's runtime can connect as an application role that is neither the owner of these tables nor
-- a superuser (docs/security.md, "Audit log"). That role may INSERT into audit_outbox and read both
-- audit tables, but it holds no INSERT on audit_events and no DELETE on audit_outbox: the only way
-- rows leave the outbox is this function, which runs with its owner's rights (SECURITY DEFINER),
-- copies the outbox rows' own content onto the end of the chain and deletes exactly those rows.
--
-- The caller computes the hashes (the encoding is in src/persistence/audit.ts); the function checks
-- that the batch continues the chain: the first prev_hash is the current head's hash (genesis on an
-- empty chain), each later prev_hash is the hash before it, and ids follow the head without gaps.
-- A wrong hash is still caught by `ferry audit verify`; what the function guarantees is that a
-- promotion can only append, never change or drop what is already on the chain.
--
-- Rule for later migrations (grants are applied by src/persistence/roles.ts, `ferry db setup-roles`,
-- and again after every migration run as the owner):
--   - a new table needs nothing: the owner's default privileges give the application role SELECT,
--     INSERT, UPDATE and DELETE on every table (and USAGE, SELECT on every sequence) it creates in
--     this schema;
--   - a table whose rows must never change gets a ferry_forbid_change() trigger (as transitions and
--     audit_events have); the role setup then revokes UPDATE, DELETE and TRUNCATE on it from the
--     application role;
--   - a table the runtime must only read: add it to READ_ONLY_TABLES in src/persistence/roles.ts;
--   - a SECURITY DEFINER function: SET search_path as below and REVOKE EXECUTE FROM PUBLIC.
CREATE FUNCTION ferry_promote_audit(p_outbox_ids bigint[], p_prev_hashes text[], p_hashes text[])
RETURNS integer LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  n integer := coalesce(cardinality(p_outbox_ids), 0);
  head_id bigint;
  head_hash text;
  moved integer;
BEGIN
  IF n = 0 THEN
    RETURN 0;
  END IF;
  IF coalesce(cardinality(p_prev_hashes), 0) <> n OR coalesce(cardinality(p_hashes), 0) <> n THEN
    RAISE EXCEPTION 'audit promotion: % outbox ids but % prev hashes and % hashes', n, cardinality(p_prev_hashes), cardinality(p_hashes);
  END IF;
  IF (SELECT count(DISTINCT x) FROM unnest(p_outbox_ids) AS x) <> n THEN
    RAISE EXCEPTION 'audit promotion: an outbox id appears twice';
  END IF;
  -- The promoter's advisory lock (src/persistence/audit.ts, AUDIT_CHAIN_LOCK): one writer of the chain.
  PERFORM pg_advisory_xact_lock(465241900);
  SELECT id, hash INTO head_id, head_hash FROM audit_events ORDER BY id DESC LIMIT 1;
  IF p_prev_hashes[1] IS DISTINCT FROM coalesce(head_hash, 'sha256:' || repeat('0', 64)) THEN
    RAISE EXCEPTION 'audit promotion: the batch does not continue the chain head (event %)', coalesce(head_id, 0);
  END IF;
  FOR i IN 2..n LOOP
    IF p_prev_hashes[i] IS DISTINCT FROM p_hashes[i - 1] THEN
      RAISE EXCEPTION 'audit promotion: link % of the batch does not follow link %', i, i - 1;
    END IF;
  END LOOP;
  INSERT INTO audit_events (id, outbox_id, actor, action, entity_type, entity_id, details, occurred_at, prev_hash, hash)
  SELECT coalesce(head_id, 0) + c.ord, o.id, o.actor, o.action, o.entity_type, o.entity_id, o.details, o.occurred_at, c.prev_hash, c.hash
    FROM unnest(p_outbox_ids, p_prev_hashes, p_hashes) WITH ORDINALITY AS c(outbox_id, prev_hash, hash, ord)
    JOIN audit_outbox o ON o.id = c.outbox_id
   ORDER BY c.ord;
  GET DIAGNOSTICS moved = ROW_COUNT;
  IF moved <> n THEN
    RAISE EXCEPTION 'audit promotion: % of % outbox rows exist', moved, n;
  END IF;
  DELETE FROM audit_outbox WHERE id = ANY (p_outbox_ids);
  RETURN n;
END $$;

-- A SECURITY DEFINER function resolves names only where its owner put them (never in a schema the
-- caller could create objects in first).
DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION ferry_promote_audit(bigint[], text[], text[]) SET search_path = pg_catalog, %I, pg_temp', current_schema());
END $$;
REVOKE ALL ON FUNCTION ferry_promote_audit(bigint[], text[], text[]) FROM PUBLIC;

-- Down Migration
DROP FUNCTION IF EXISTS ferry_promote_audit(bigint[], text[], text[]);
