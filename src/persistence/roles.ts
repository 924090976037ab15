import pg from 'pg';
import { PGBOSS_SCHEMA } from './pgboss-jobs.ts';
import { APP_NAMES } from '../connection-budget.ts';
import type { Queryable } from './db.ts';

/**
 * The two database roles of a protected deployment (docs/security.md, "Audit log"):
 *
 *   - the owner runs the migrations and owns Ferry's tables, functions and triggers;
 *   - the application role is what the runtime connects as. It is neither the owner nor a member of
 *     it nor a superuser, so it can neither drop the append-only triggers nor disable them, and it
 *     holds no UPDATE, DELETE or TRUNCATE on the append-only tables. Rows leave audit_outbox only
 *     through ferry_promote_audit (migration 0090), which runs with the owner's rights.
 *
 * pg-boss's schema is the application role's own: pg-boss creates and drops tables at run time (queue
 * partitions, statistics partitions) and migrates its schema when it starts, which only an owner
 * may do. Its rows are work items the runtime creates and consumes, not records; the audit
 * guarantee does not rest on them.
 *
 * Every statement here is idempotent: applying them again (every migration run as the owner does)
 * changes nothing, and also covers tables created by later migrations.
 */

/** The role Ferry's runtime uses on the embedded server; its password lives in the data folder. */
export const EMBEDDED_APP_ROLE = 'ferry_app';

export interface RoleNames {
  owner: string;
  app: string;
  /** Where the migrations put Ferry's tables (the owner's current schema; 'public' by default). */
  schema?: string;
}

/** Tables the runtime reads but never writes. */
export const READ_ONLY_TABLES = ['ferry_migrations'] as const;

/** Table -> privileges the application role never holds, besides the append-only rule below. */
const PROMOTION_ONLY: Record<string, string> = {
  // Events are appended only by ferry_promote_audit.
  audit_events: 'INSERT',
  // Outbox rows are deleted only by ferry_promote_audit.
  audit_outbox: 'DELETE',
};

const PROMOTE_FUNCTION = 'ferry_promote_audit(bigint[], text[], text[])';

const ident = (name: string) => pg.escapeIdentifier(name);
const literal = (value: string) => pg.escapeLiteral(value);

/** `sql` only once the migrations have made `object` (setup may run before the first migration). */
function ifExists(kind: 'table' | 'function', object: string, sql: string): string {
  const test = kind === 'table' ? `to_regclass(${literal(object)})` : `to_regprocedure(${literal(object)})`;
  return `DO $$ BEGIN IF ${test} IS NOT NULL THEN EXECUTE ${literal(sql)}; END IF; END $$`;
}

/**
 * What the owner grants the application role; the owner can run these by itself, and Ferry runs
 * them after every migration when it migrates as a separate owner.
 */
export function grantStatements(names: RoleNames): string[] {
  const schema = ident(names.schema ?? 'public');
  const app = ident(names.app);
  const owner = ident(names.owner);
  const out = [
    `GRANT USAGE ON SCHEMA ${schema} TO ${app}`,
    `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${schema} TO ${app}`,
    `REVOKE TRUNCATE, REFERENCES, TRIGGER ON ALL TABLES IN SCHEMA ${schema} FROM ${app}`,
    `GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA ${schema} TO ${app}`,
    // Tables and sequences created by later migrations get the same grants as they are created.
    `ALTER DEFAULT PRIVILEGES FOR ROLE ${owner} IN SCHEMA ${schema} GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ${app}`,
    `ALTER DEFAULT PRIVILEGES FOR ROLE ${owner} IN SCHEMA ${schema} GRANT USAGE, SELECT ON SEQUENCES TO ${app}`,
    ...READ_ONLY_TABLES.map((t) => ifExists('table', `${schema}.${ident(t)}`, `REVOKE INSERT, UPDATE, DELETE ON ${schema}.${ident(t)} FROM ${app}`)),
    // Append-only: every table guarded by a ferry_forbid_change() trigger, whichever migration made it.
    `DO $$
DECLARE t regclass;
BEGIN
  FOR t IN SELECT DISTINCT tg.tgrelid::regclass
             FROM pg_trigger tg
             JOIN pg_class c ON c.oid = tg.tgrelid
            WHERE tg.tgfoid = to_regprocedure(${literal(`${schema}.ferry_forbid_change()`)})
              AND c.relnamespace = ${literal(names.schema ?? 'public')}::regnamespace
  LOOP
    EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON %s FROM %I', t, ${literal(names.app)});
  END LOOP;
END $$`,
    ...Object.entries(PROMOTION_ONLY).map(([t, priv]) => ifExists('table', `${schema}.${ident(t)}`, `REVOKE ${priv} ON ${schema}.${ident(t)} FROM ${app}`)),
    ifExists('function', `${schema}.${PROMOTE_FUNCTION}`, `GRANT EXECUTE ON FUNCTION ${schema}.${PROMOTE_FUNCTION} TO ${app}`),
  ];
  return out;
}

/**
 * Everything `ferry db setup-roles` does: make sure the application role exists (without a
 * password: the operator sets one), refuse one that could undo the guarantee, let it connect, give
 * it pg-boss's schema, then the grants. Needs a superuser, or a role that may create roles and act
 * as the application role.
 */
export function setupStatements(names: RoleNames, opts: { createAppRole?: boolean } = {}): string[] {
  const app = names.app;
  const boss = ident(PGBOSS_SCHEMA);
  const out: string[] = [];
  if (opts.createAppRole ?? true) {
    out.push(`DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = ${literal(app)}) THEN
    CREATE ROLE ${ident(app)} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
  END IF;
END $$`);
  }
  out.push(
    `DO $$
BEGIN
  IF ${literal(app)} = ${literal(names.owner)} THEN
    RAISE EXCEPTION 'the application role must not be the owner role (%)', ${literal(app)};
  END IF;
  IF (SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = ${literal(app)}) THEN
    RAISE EXCEPTION 'the application role % is a superuser or bypasses row security', ${literal(app)};
  END IF;
  IF pg_has_role(${literal(app)}, ${literal(names.owner)}, 'MEMBER') THEN
    RAISE EXCEPTION 'the application role % is a member of the owner role %', ${literal(app)}, ${literal(names.owner)};
  END IF;
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), ${literal(app)});
END $$`,
    `CREATE SCHEMA IF NOT EXISTS ${boss} AUTHORIZATION ${ident(app)}`,
    // A schema pg-boss installed earlier under another role (a single-role deployment) moves over.
    `DO $$
DECLARE r record;
BEGIN
  IF (SELECT nspowner FROM pg_namespace WHERE nspname = ${literal(PGBOSS_SCHEMA)}) <> ${literal(app)}::regrole THEN
    EXECUTE format('ALTER SCHEMA %I OWNER TO %I', ${literal(PGBOSS_SCHEMA)}, ${literal(app)});
  END IF;
  FOR r IN SELECT c.oid::regclass AS obj FROM pg_class c
            WHERE c.relnamespace = ${literal(PGBOSS_SCHEMA)}::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
              AND c.relowner <> ${literal(app)}::regrole
  LOOP
    EXECUTE format('ALTER TABLE %s OWNER TO %I', r.obj, ${literal(app)});
  END LOOP;
  -- Sequences that belong to a table moved with it; the others move here.
  FOR r IN SELECT c.oid::regclass AS obj FROM pg_class c
            WHERE c.relnamespace = ${literal(PGBOSS_SCHEMA)}::regnamespace AND c.relkind = 'S'
              AND c.relowner <> ${literal(app)}::regrole
  LOOP
    EXECUTE format('ALTER SEQUENCE %s OWNER TO %I', r.obj, ${literal(app)});
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS obj FROM pg_proc p
            WHERE p.pronamespace = ${literal(PGBOSS_SCHEMA)}::regnamespace AND p.proowner <> ${literal(app)}::regrole
  LOOP
    EXECUTE format('ALTER ROUTINE %s OWNER TO %I', r.obj, ${literal(app)});
  END LOOP;
  FOR r IN SELECT t.oid::regtype AS obj FROM pg_type t
            WHERE t.typnamespace = ${literal(PGBOSS_SCHEMA)}::regnamespace AND t.typtype IN ('e', 'd')
              AND t.typowner <> ${literal(app)}::regrole
  LOOP
    EXECUTE format('ALTER TYPE %s OWNER TO %I', r.obj, ${literal(app)});
  END LOOP;
END $$`,
    ...grantStatements(names),
  );
  return out;
}

/** The statements as a script an operator can read and run with psql. */
export function asScript(statements: string[]): string {
  return ['BEGIN;', ...statements.map((s) => s + ';'), 'COMMIT;', ''].join('\n');
}

/** Runs the statements in one transaction on a connection of its own. */
export async function applyStatements(url: string, statements: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: url, application_name: APP_NAMES.migrate });
  client.on('error', () => {});
  await client.connect();
  try {
    // Several processes starting together apply the same grants; one at a time avoids
    // "tuple concurrently updated" on the catalogs.
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock(465241901)');
    for (const sql of statements) await client.query(sql);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The schema the owner's migrations create tables in (its current schema). */
export async function currentSchema(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url, application_name: APP_NAMES.migrate });
  client.on('error', () => {});
  await client.connect();
  try {
    const { rows } = await client.query<{ s: string }>('SELECT current_schema() AS s');
    return rows[0].s;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The user name a connection string logs in as; null when it names none. */
export function urlRole(url: string): string | null {
  try {
    const u = new URL(url);
    return u.username ? decodeURIComponent(u.username) : null;
  } catch {
    return null;
  }
}

export interface AuditProtection {
  /** The connection cannot change or remove what is already on the audit trail. */
  protected: boolean;
  /** Why not, one line each. */
  reasons: string[];
}

/** What the role of this connection could do to the append-only tables. */
export async function auditProtection(db: Queryable): Promise<AuditProtection> {
  const { rows } = await db.query<{ superuser: boolean; owner: boolean; privileges: string[] | null }>(
    `SELECT r.rolsuper AS superuser,
            pg_has_role(current_user, c.relowner, 'MEMBER') AS owner,
            (SELECT array_agg(p.t || ' ' || p.priv ORDER BY p.t, p.priv)
               FROM (VALUES ('transitions', 'UPDATE'), ('transitions', 'DELETE'), ('transitions', 'TRUNCATE'),
                            ('audit_events', 'INSERT'), ('audit_events', 'UPDATE'), ('audit_events', 'DELETE'),
                            ('audit_events', 'TRUNCATE'), ('audit_outbox', 'DELETE'), ('audit_outbox', 'TRUNCATE')) AS p(t, priv)
              WHERE has_table_privilege(p.t, p.priv)) AS privileges
       FROM pg_roles r, pg_class c
      WHERE r.rolname = current_user AND c.oid = 'audit_events'::regclass`,
  );
  const r = rows[0];
  const reasons: string[] = [];
  if (r.superuser) reasons.push('connected as a superuser');
  if (r.owner) reasons.push('connected as the owner of the audit tables (or a member of it)');
  if (!r.superuser && r.privileges?.length) reasons.push(`holds ${r.privileges.join(', ')}`);
  return { protected: reasons.length === 0, reasons };
}

export interface PreparedDatabase {
  /** Migrations applied by this run. */
  applied: string[];
  /** The runtime connects as a role of its own, distinct from the owner that migrated. */
  separated: boolean;
}

/**
 * Migrates as the owner (`ownerUrl`), then, when the runtime connects as another role (`appUrl`),
 * applies the grants again so tables of new migrations follow the rules. `setup` also runs the rest
 * of the role setup (pg-boss's schema): the embedded server, whose owner is a superuser, does that.
 * With one role for both (no owner URL), nothing beyond the migrations happens.
 * @throws Error naming `ferry db setup-roles` when the external database was not set up for the role.
 */
export async function prepareDatabase(opts: {
  ownerUrl: string;
  appUrl: string;
  setup?: boolean;
  migrate: (url: string) => Promise<string[]>;
}): Promise<PreparedDatabase> {
  const applied = await opts.migrate(opts.ownerUrl);
  const owner = urlRole(opts.ownerUrl);
  const app = urlRole(opts.appUrl);
  if (!owner || !app || owner === app) return { applied, separated: false };
  const schema = await currentSchema(opts.ownerUrl);
  const names = { owner, app, schema };
  if (opts.setup) {
    await applyStatements(opts.ownerUrl, setupStatements(names, { createAppRole: false }));
  } else {
    await applyStatements(opts.ownerUrl, grantStatements(names)).catch((cause) => {
      throw new Error(`could not grant the application role ${app} its rights as ${owner}; run \`ferry db setup-roles --apply\``, { cause });
    });
    await assertBossSchemaOwnedBy(opts.ownerUrl, app);
  }
  return { applied, separated: true };
}

async function assertBossSchemaOwnedBy(url: string, app: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, application_name: APP_NAMES.migrate });
  client.on('error', () => {});
  await client.connect();
  try {
    const { rows } = await client.query<{ owner: string }>(
      'SELECT pg_get_userbyid(nspowner) AS owner FROM pg_namespace WHERE nspname = $1',
      [PGBOSS_SCHEMA],
    );
    if (rows[0]?.owner !== app) {
      throw new Error(
        `the schema ${PGBOSS_SCHEMA} ${rows[0] ? `belongs to ${rows[0].owner}` : 'does not exist'}, but pg-boss runs as ${app}; ` +
          'run `ferry db setup-roles --apply` (as a superuser) first',
      );
    }
  } finally {
    await client.end().catch(() => {});
  }
}

/** Whether the schema exists (pg-boss must not try to create one its role may not create). */
export async function schemaExists(url: string, schema: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, application_name: APP_NAMES.pgboss });
  client.on('error', () => {});
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    return (rowCount ?? 0) > 0;
  } finally {
    await client.end().catch(() => {});
  }
}
