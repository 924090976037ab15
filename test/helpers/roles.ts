/**
 * A database set up the way docs/security.md tells an operator to: an owner role (not a superuser)
 * that owns the database and runs the migrations, and an application role the runtime connects as,
 * given its rights by `ferry db setup-roles --apply` run as a superuser.
 */
import { randomBytes } from 'node:crypto';
import { after } from 'node:test';
import pg from 'pg';
import { migrate } from '../../src/persistence/migrate.ts';
import { dropDatabase, withDatabase } from '../../scripts/lib/test-databases.ts';

export interface RoleDatabase {
  name: string;
  /** A superuser on this database (the test server's admin). */
  adminUrl: string;
  owner: string;
  ownerUrl: string;
  app: string;
  appUrl: string;
}

function asUser(url: string, user: string, password: string): string {
  const u = new URL(url);
  u.username = user;
  u.password = password;
  return u.toString();
}

/**
 * Creates both roles and a database owned by the owner, migrated by it. The application role exists
 * (with a password) but holds no rights yet: the caller runs the setup. Everything is dropped when
 * the file ends.
 */
export async function roleDatabase(): Promise<RoleDatabase> {
  const adminServerUrl = process.env.FERRY_TEST_ADMIN_URL;
  if (!adminServerUrl) throw new Error('run tests through `npm test` (it prepares the database server)');
  const tag = `${process.pid}_${randomBytes(4).toString('hex')}`;
  const name = `ferry_t_${tag}`;
  const owner = `ferry_o_${tag}`;
  const app = `ferry_a_${tag}`;
  const password = randomBytes(12).toString('hex');
  const admin = new pg.Client({ connectionString: adminServerUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE ROLE ${pg.escapeIdentifier(owner)} LOGIN PASSWORD ${pg.escapeLiteral(password)}`);
    await admin.query(`CREATE ROLE ${pg.escapeIdentifier(app)} LOGIN PASSWORD ${pg.escapeLiteral(password)}`);
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)} OWNER ${pg.escapeIdentifier(owner)}`);
  } finally {
    await admin.end();
  }
  const adminUrl = withDatabase(adminServerUrl, name);
  const db: RoleDatabase = {
    name,
    adminUrl,
    owner,
    ownerUrl: asUser(adminUrl, owner, password),
    app,
    appUrl: asUser(adminUrl, app, password),
  };
  after(async () => {
    if (process.env.FERRY_KEEP_TEST_DB === '1') return;
    await dropDatabase(adminServerUrl, name);
    const c = new pg.Client({ connectionString: adminServerUrl });
    await c.connect();
    try {
      for (const role of [app, owner]) await c.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(role)}`).catch(() => {});
    } finally {
      await c.end();
    }
  });
  // As the owner, which is no superuser: the migrations need nothing more than owning the database.
  await migrate(db.ownerUrl);
  return db;
}
