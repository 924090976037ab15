import { randomBytes } from 'node:crypto';
import { after, afterEach } from 'node:test';
import { createPool, type Pool } from '../../src/persistence/db.ts';
import { cloneTemplate, dropDatabase } from '../../scripts/lib/test-databases.ts';

export interface TestDb {
  url: string;
  name: string;
  pool: Pool;
}

/** A copy of the migrated template `npm test` built, under a name of this process. */
async function cloneForTest(poolMax: number): Promise<TestDb & { adminUrl: string }> {
  const adminUrl = process.env.FERRY_TEST_ADMIN_URL;
  const template = process.env.FERRY_TEST_TEMPLATE;
  if (!adminUrl || !template) throw new Error('run tests through `npm test` (it prepares the database server)');
  const name = `ferry_t_${process.pid}_${randomBytes(4).toString('hex')}`;
  const url = await cloneTemplate(adminUrl, template, name);
  return { adminUrl, url, name, pool: createPool(url, poolMax, 'ferry-test', { namedStatements: true }) };
}

/**
 * A fresh, migrated database for this test file. It is dropped when the file ends, unless
 * FERRY_KEEP_TEST_DB=1 or a test in the file failed.
 */
export async function testDatabase(): Promise<TestDb> {
  const { adminUrl, ...db } = await cloneForTest(20);
  let failed = false;
  afterEach((t) => {
    if ((t as { passed?: boolean }).passed === false) failed = true;
  });
  after(async () => {
    await db.pool.end();
    if (!failed && process.env.FERRY_KEEP_TEST_DB !== '1') await dropDatabase(adminUrl, db.name);
  });
  return db;
}

/**
 * A database of its own for one test, for tests whose workers sweep every row (dispatcher,
 * observer, recovery) and so must not see another test's leftovers. Dropped when the test passes.
 */
export async function scratchDatabase(t: { after: (fn: () => Promise<void>) => void; passed?: boolean }): Promise<TestDb> {
  const { adminUrl, ...db } = await cloneForTest(10);
  t.after(async () => {
    await db.pool.end();
    if (t.passed !== false && process.env.FERRY_KEEP_TEST_DB !== '1') await dropDatabase(adminUrl, db.name);
  });
  return db;
}
