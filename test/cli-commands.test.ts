import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pg from 'pg';
import { writeAudit } from '../src/persistence/audit.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { startEmbeddedPostgres } from '../src/persistence/embedded.ts';
import { dropDatabase, withDatabase } from '../scripts/lib/test-databases.ts';
import { authenticateToken, createToken } from '../src/persistence/tokens.ts';
import { proposePrincipal } from '../src/services/credential-proposals.ts';
import { testDatabase } from './helpers/db.ts';
import { runCliProcess, startCliProcess, type CliRun } from './helpers/cli.ts';
import { oldSystemNode, repoRoot } from './helpers/ferry-process.ts';
import { freePort } from './helpers/net.ts';
import { waitFor, within } from './helpers/wait.ts';

const { url, pool } = await testDatabase();

/** Runs the CLI as a user would, in its own process (on this file's database unless `env` says otherwise). */
const ferry = (args: string[], env: NodeJS.ProcessEnv = { DATABASE_URL: url }, entry?: string[]) => runCliProcess(args, env, entry);

const noStack = (r: CliRun) => assert.doesNotMatch(r.stdout + r.stderr, /\n\s+at .+:\d+/, 'no stack trace');

test('tokens create prints a token once, and it authenticates', async () => {
  const r = await ferry(['tokens', 'create', '--name', 'x', '--role', 'admin']);
  assert.equal(r.code, 0, r.stderr);
  const tokens = r.stdout.match(/fy_[A-Za-z0-9_-]{43}/g);
  assert.equal(tokens?.length, 1, 'the token appears exactly once');
  assert.match(r.stdout, /not .*again|cannot show it again/i);
  const who = await authenticateToken(pool, tokens![0]);
  assert.equal(who?.name, 'x');
  assert.equal(who?.role, 'admin');

  const j = await ferry(['tokens', 'create', '--name', 'y', '--role', 'viewer', '--json']);
  assert.equal(j.code, 0, j.stderr);
  const created = JSON.parse(j.stdout);
  assert.equal(created.role, 'viewer');
  assert.equal((await authenticateToken(pool, created.token))?.id, created.id);
});

test('tokens list shows tokens without their secrets', async () => {
  const r = await ferry(['tokens', 'list']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^ID\s+NAME\s+ROLE/);
  assert.match(r.stdout, /\bx\s+admin\b/);
  assert.doesNotMatch(r.stdout, /fy_/);
  const { rows } = await pool.query<{ token_hash: string }>('SELECT token_hash FROM api_tokens');
  for (const { token_hash } of rows) assert.ok(!r.stdout.includes(token_hash));

  const j = await ferry(['tokens', 'list', '--json']);
  const listed = JSON.parse(j.stdout) as Record<string, unknown>[];
  assert.deepEqual(listed.map((t) => t.name).sort(), ['x', 'y']);
  for (const t of listed) assert.ok(!('token_hash' in t) && !('token' in t));
});

test('tokens revoke by name or id; a second revoke fails with exit 1', async () => {
  const made = JSON.parse((await ferry(['tokens', 'create', '--name', 'temp', '--role', 'operator', '--json'])).stdout);
  const r = await ferry(['tokens', 'revoke', '--name', 'temp']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /Revoked token "temp"/);
  assert.equal(await authenticateToken(pool, made.token), null);
  const again = await ferry(['tokens', 'revoke', '--id', made.id]);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /not found/);
  noStack(again);
  const list = await ferry(['tokens', 'list', '--all']);
  assert.match(list.stdout, /temp\s+operator.*revoked/);
});

test('audit verify promotes pending rows, passes, then fails on a tampered row', async () => {
  // The token commands above were audited too: their rows come first in the chain.
  const before = (await pool.query('SELECT count(*)::int AS n FROM audit_outbox')).rows[0].n as number;
  assert.ok(before >= 7, `tokens create and revoke left audit rows (${before})`);
  for (let i = 0; i < 12; i++) {
    await writeAudit(pool, { actor: 'token:x', action: 'test.write', entity_type: 'test', entity_id: String(i), details: { i } });
  }
  const ok = await ferry(['audit', 'verify']);
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal(ok.stdout.trim(), `audit chain ok (${before + 12} events)`);
  assert.equal((await pool.query('SELECT count(*)::int AS n FROM audit_outbox')).rows[0].n, 0);

  const head = await ferry(['audit', 'head']);
  assert.match(head.stdout.trim(), new RegExp(`^${before + 12}:sha256:[0-9a-f]{64}$`));

  await withTransaction(pool, async (c) => {
    await c.query('ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only');
    await c.query(`UPDATE audit_events SET details = '{"i": 99}' WHERE id = $1`, [before + 7]);
    await c.query('ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only');
  });
  const bad = await ferry(['audit', 'verify']);
  assert.equal(bad.code, 1);
  assert.match(bad.stdout, new RegExp(`BROKEN at event ${before + 7}: hash mismatch`));
  const json = JSON.parse((await ferry(['audit', 'verify', '--json'])).stdout);
  assert.deepEqual({ ok: json.ok, id: json.broken.id }, { ok: false, id: before + 7 });

  const cp = await ferry(['audit', 'verify', '--checkpoint', head.stdout.trim()]);
  assert.equal(cp.code, 1, 'the tampered row still fails with a checkpoint');
});

test('principals create, tokens of a principal with an expiry, disable: each change audited as the CLI user', async () => {
  const p = await ferry(['principals', 'create', '--name', 'carol', '--kind', 'person', '--by', 'ops-ann']);
  assert.equal(p.code, 0, p.stderr);
  assert.match(p.stdout, /Created principal "carol" \(person/);
  const dup = await ferry(['principals', 'create', '--name', 'carol']);
  assert.equal(dup.code, 2, 'refused input is a usage problem');
  assert.match(dup.stderr, /already exists/);

  const unknown = await ferry(['tokens', 'create', '--principal', 'nobody', '--role', 'viewer']);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /principal.*nobody.*not found|not found.*nobody/i);
  noStack(unknown);

  const t1 = JSON.parse((await ferry(['tokens', 'create', '--principal', 'carol', '--role', 'requester', '--expires-in', '30d', '--json', '--by', 'ops-ann'])).stdout);
  assert.equal(t1.name, 'carol.requester', 'named after its principal and role');
  assert.equal(t1.principal_name, 'carol');
  const days = (Date.parse(t1.expires_at) - Date.now()) / 86_400_000;
  assert.ok(days > 29.9 && days <= 30, `expires in 30 days: ${t1.expires_at}`);
  const t2 = JSON.parse((await ferry(['tokens', 'create', '--principal', 'carol', '--role', 'approver', '--json'])).stdout);
  const [w1, w2] = [await authenticateToken(pool, t1.token), await authenticateToken(pool, t2.token)];
  assert.equal(w1?.principalId, w2?.principalId, 'two tokens, one principal');
  assert.equal(w1?.principalName, 'carol');

  const listed = await ferry(['tokens', 'list', '--principal', 'carol']);
  assert.match(listed.stdout, /carol\.requester\s+requester\s+carol\s/);
  const principals = await ferry(['principals', 'list']);
  assert.match(principals.stdout, /^ID\s+NAME\s+KIND/);
  assert.match(principals.stdout, /\bcarol\s+person\b/);

  assert.equal((await ferry(['tokens', 'revoke', '--name', 'carol.approver', '--by', 'ops-ann'])).code, 0);
  const d = await ferry(['principals', 'disable', '--name', 'carol', '--by', 'ops-ann']);
  assert.equal(d.code, 0, d.stderr);
  assert.equal(await authenticateToken(pool, t1.token), null, 'a disabled principal\'s tokens no longer authenticate');
  assert.doesNotMatch((await ferry(['principals', 'list'])).stdout, /\bcarol\b/);
  assert.match((await ferry(['principals', 'list', '--all'])).stdout, /\bcarol\s+person\s+\S+\s+disabled/);

  const { rows } = await pool.query<{ actor: string; action: string; entity_id: string; details: Record<string, unknown> }>(
    `SELECT actor, action, entity_id, details FROM audit_outbox
      WHERE action IN ('principal.create', 'principal.disable', 'token.create', 'token.revoke') AND (details->>'name' LIKE 'carol%' OR details->>'principal_name' = 'carol')
      ORDER BY id`,
  );
  assert.deepEqual(
    rows.map((r) => `${r.actor} ${r.action} ${String(r.details.name)}`),
    [
      'cli:ops-ann principal.create carol',
      'cli:ops-ann token.create carol.requester',
      `cli:${userInfo().username} token.create carol.approver`,
      'cli:ops-ann token.revoke carol.approver',
      'cli:ops-ann principal.disable carol',
    ],
  );
  assert.equal(rows[1]!.entity_id, t1.id);
  assert.equal(rows[1]!.details.expires_at, t1.expires_at);
  assert.equal(rows[1]!.details.role, 'requester');
  const text = JSON.stringify(rows);
  assert.ok(!text.includes(t1.token) && !text.includes(t2.token), 'no secret in the audit trail');
  const { rows: hashes } = await pool.query<{ token_hash: string }>('SELECT token_hash FROM api_tokens');
  for (const { token_hash } of hashes) assert.ok(!text.includes(token_hash));
});

test('tokens create by name alone still works (the principal of that name is made for it, audited)', async () => {
  const r = JSON.parse((await ferry(['tokens', 'create', '--name', 'dora', '--role', 'viewer', '--json', '--by', 'ops-ann'])).stdout);
  assert.equal(r.principal_name, 'dora');
  const { rows } = await pool.query<{ actor: string; action: string }>(
    `SELECT actor, action FROM audit_outbox WHERE entity_id IN ($1, $2) ORDER BY id`,
    [r.id, r.principal_id],
  );
  assert.deepEqual(rows.map((x) => `${x.actor} ${x.action}`), ['cli:ops-ann principal.create', 'cli:ops-ann token.create']);
  // A bare name that is a principal's never lands on it: the principal must be named.
  const landed = await ferry(['tokens', 'create', '--name', 'dora', '--role', 'approver']);
  assert.equal(landed.code, 2, landed.stderr);
  assert.match(landed.stderr, /a principal named dora exists/);
  assert.equal((await pool.query(`SELECT count(*)::int AS n FROM api_tokens t JOIN principals p ON p.id = t.principal_id WHERE p.name = 'dora'`)).rows[0].n, 1);
});

test('credentials confirm: the CLI (database access) is the second person for an admin proposal', async () => {
  // What a lone admin proposed through the API (POST /v3/principals answers 202 with this proposal).
  const solo = await createToken(pool, { name: 'solo-admin', role: 'admin' });
  const proposal = await proposePrincipal({ pool, config: { credentialReviewWindowSeconds: 3600 } }, { name: 'eve', kind: 'person' }, `principal:${solo.principal_id}`);
  const listed = await ferry(['credentials', 'list']);
  assert.match(listed.stdout, new RegExp(`${proposal!.id}\\s+PROPOSED\\s+principal eve \\(person\\)`));
  const ok = await ferry(['credentials', 'confirm', proposal!.id, '--by', 'ops-ann']);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /created principal "eve"/);
  const again = await ferry(['credentials', 'confirm', proposal!.id]);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /CONFIRMED/);
  const { rows } = await pool.query(`SELECT actor FROM audit_outbox WHERE action = 'principal.create' AND details->>'name' = 'eve'`);
  assert.deepEqual(rows.map((r) => r.actor), ['cli:ops-ann']);
});

test('bad arguments exit 2 with a usage message and no stack trace', async () => {
  const cases: [string[], RegExp][] = [
    [['tokens', 'create', '--name', 'z', '--role', 'root'], /unknown role "root"; choose one of: viewer, requester, approver, operator, admin/],
    [['tokens', 'create', '--role', 'admin'], /give --principal .* or --name/],
    [['tokens', 'create', '--principal', 'p', '--role', 'admin', '--expires-in', 'soon'], /--expires-in must be a whole number of minutes, hours or days/],
    [['principals', 'create'], /--name is required/],
    [['principals', 'create', '--name', 'p', '--kind', 'robot'], /unknown kind "robot"; choose one of: person, service/],
    [['principals', 'disable'], /exactly one of --name or --id/],
    [['tokens', 'create', '--name', 'bad name', '--role', 'admin'], /token name must be/],
    [['tokens', 'create', '--name'], /argument missing/],
    [['tokens', 'create', '--name', 'z', '--role', 'admin', '--colour', 'red'], /Unknown option '--colour'/],
    [['tokens', 'revoke'], /exactly one of --name or --id/],
    [['tokens', 'revoke', '--name', 'a', '--id', 'b'], /exactly one of --name or --id/],
    [['tokens', 'revoke', '--id', 'not-a-uuid'], /must be a token id/],
    [['tokens', 'list', 'extra'], /unexpected argument "extra"/],
    [['tokens', 'frobnicate'], /unknown tokens command "frobnicate"/],
    [['tokens'], /a subcommand is required/],
    [['launch'], /unknown command "launch"/],
    [['audit', 'verify', '--checkpoint', 'nope'], /--checkpoint must be ID:HASH/],
    [[], /usage: ferry <command>/],
  ];
  for (const [args, message] of cases) {
    const r = await ferry(args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message, args.join(' '));
    assert.match(r.stderr, /usage: ferry/, args.join(' '));
    noStack(r);
  }
  const { rows } = await pool.query(`SELECT count(*)::int AS n FROM api_tokens WHERE name = 'z'`);
  assert.equal(rows[0].n, 0);
});

test('help exits 0 and lists the commands', async () => {
  const r = await ferry(['--help']);
  assert.equal(r.code, 0);
  for (const c of ['start', 'migrate', 'principals create', 'principals list', 'principals disable', 'tokens create', 'tokens list', 'tokens revoke', 'audit verify']) assert.ok(r.stdout.includes(c), c);
  const sub = await ferry(['tokens', 'create', '--help']);
  assert.equal(sub.code, 0);
  assert.match(sub.stdout, /usage: ferry tokens create \[--principal PRINCIPAL\] \[--name NAME\] --role/);
});

test('the bin entry runs the same CLI', async () => {
  const r = await ferry(['tokens', 'list', '--json'], { DATABASE_URL: url }, ['bin/ferry.js']);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(Array.isArray(JSON.parse(r.stdout)));
});

const oldNode = oldSystemNode();
test('the bin entry under a Node.js older than Ferry needs says so in one line, no stack trace', { skip: oldNode ? false : 'no Node older than 22.12 on PATH' }, () => {
  const r = spawnSync(oldNode!, ['bin/ferry.js', '--help'], { cwd: repoRoot, encoding: 'utf8' });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /^ferry: Node\.js >= 22\.12 is required, this is v\d+\.\d+\.\d+ .*\n$/);
  assert.equal(r.stderr.split('\n').length, 2, `one line: ${r.stderr}`);
});

test('migrate brings an empty database up; other commands refuse an unmigrated one', async () => {
  const scratch = await createDatabaseFromScratch();
  try {
    const refused = await ferry(['tokens', 'list'], { DATABASE_URL: scratch.url });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /pending migration\(s\); run `ferry migrate` first/);
    noStack(refused);
    const m = await ferry(['migrate'], { DATABASE_URL: scratch.url });
    assert.equal(m.code, 0, m.stderr);
    assert.match(m.stdout, /applied 0001_core/);
    assert.match(m.stdout, /applied 0005_audit_chain_and_tokens/);
    assert.equal((await ferry(['migrate'], { DATABASE_URL: scratch.url })).stdout.trim(), 'database is up to date');
    assert.equal((await ferry(['tokens', 'list'], { DATABASE_URL: scratch.url })).code, 0);
  } finally {
    await scratch.drop();
  }
});

test('an unreachable DATABASE_URL is a clear error, not a crash', async () => {
  const port = await freePort();
  const r = await ferry(['tokens', 'list'], { DATABASE_URL: `postgres://ferry:secret@127.0.0.1:${port}/ferry` });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /cannot use the database at postgres:\/\/ferry:\*\*\*@127\.0\.0\.1/);
  assert.doesNotMatch(r.stderr, /secret/);
  noStack(r);
});

test('without DATABASE_URL the CLI uses the embedded server: starting it when down, joining it when up', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'ferry-cli-'));
  // Run as root, the embedded server drops to its own system user, which must reach the folder.
  chmodSync(dataDir, 0o755);
  const port = await freePort();
  const env = { FERRY_DATA_DIR: dataDir, FERRY_EMBEDDED_PG_PORT: String(port) };
  try {
    const created = await ferry(['tokens', 'create', '--name', 'first', '--role', 'admin', '--json'], env);
    assert.equal(created.code, 0, created.stderr);
    const { token } = JSON.parse(created.stdout);
    // The command started the server for itself and stopped it again.
    await assert.rejects(probe(port), /ECONNREFUSED/);

    const server = await startEmbeddedPostgres({ dataDir, port });
    try {
      const listed = await ferry(['tokens', 'list', '--json'], env);
      assert.equal(listed.code, 0, listed.stderr);
      assert.deepEqual(JSON.parse(listed.stdout).map((t: { name: string }) => t.name), ['first']);
      // It joined the running server and left it running.
      const p = new pg.Pool({ connectionString: server.url });
      try {
        assert.equal((await authenticateToken(p, token))?.role, 'admin');
      } finally {
        await p.end();
      }
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

/** An empty database (no migrations), named so that leftover test databases get cleaned up. */
async function createDatabaseFromScratch(): Promise<{ url: string; drop(): Promise<void> }> {
  const adminUrl = process.env.FERRY_TEST_ADMIN_URL!;
  const name = `ferry_t_${process.pid}_scratch`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return { url: withDatabase(adminUrl, name), drop: () => dropDatabase(adminUrl, name) };
}

test('start runs Ferry (as npm start does) until SIGTERM, then stops it and exits 0', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'ferry-cli-start-'));
  const start = startCliProcess(['start'], { DATABASE_URL: url, HOST: '127.0.0.1', PORT: '0', FERRY_LOG_LEVEL: 'info', FERRY_DATA_DIR: dataDir });
  const running = await waitFor('`ferry start` to listen', () => {
    if (start.child.exitCode !== null) throw new Error(`start exited early: ${start.errors()}${start.output()}`);
    return /"url":"(http:\/\/[^"]+)"[^\n]*"msg":"ferry listening/.exec(start.output())?.[1];
  });
  const health = await fetch(new URL('/healthz', running));
  assert.equal(health.status, 200);
  start.child.kill('SIGTERM');
  const stopped = await within('`ferry start` to exit on SIGTERM', start.done);
  assert.equal(stopped.code, 0, stopped.stderr);
  assert.match(stopped.stdout, /ferry stopped/);
});

async function probe(port: number): Promise<void> {
  const c = new pg.Client({ host: '127.0.0.1', port, user: 'ferry', database: 'ferry', connectionTimeoutMillis: 2000 });
  try {
    await c.connect();
  } finally {
    await c.end().catch(() => {});
  }
}
