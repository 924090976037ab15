/**
 * The API commands' token and approval rules, and the commands that were missing: a token is never
 * taken from the command line (FERRY_TOKEN, --token-file PATH or --token-file -); `movements approve`
 * shows the plan and asks on a terminal, and off one needs the plan hash or --yes; `templates list`,
 * `movements reject|cancel|retry`; a database command with FERRY_URL set refuses, and says which database it opened otherwise.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { runCli } from '../src/cli/run.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { startCliProcess } from './helpers/cli.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { callApi } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { waitFor } from './helpers/wait.ts';

const { db, ferry } = await ferryForFile({}, { runtime: 'workers' });
const tokens = {
  operator: (await createToken(db.pool, { name: 'api-operator', role: 'operator' })).token,
  requester: (await createToken(db.pool, { name: 'api-requester', role: 'requester' })).token,
  approver: (await createToken(db.pool, { name: 'api-approver', role: 'approver' })).token,
  admin: (await createToken(db.pool, { name: 'api-admin', role: 'admin' })).token,
};

await makeTemplateLive(
  ferry.url,
  db.pool,
  {
    template_key: 'api.pay',
    description: 'one payment',
    nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'transfer', executor_binding: 'exec.sim.action', config: { sim: { latency_ms: 20 } } }],
    edges: [],
  },
  { proposer: tokens.operator, approver: tokens.approver },
);
await makeTemplateLive(
  ferry.url,
  db.pool,
  {
    template_key: 'api.flaky',
    nodes: [
      { node_key: 'once', node_kind: 'action', action_type: 'x', executor_binding: 'exec.sim.action', retryable: true, config: { sim: { latency_ms: 20, preflight: 'FAILED' } } },
    ],
    edges: [],
  },
  { proposer: tokens.operator, approver: tokens.approver },
);

const dir = mkdtempSync(join(tmpdir(), 'ferry-cli-api-'));

/** `ferry <args>` in a process of its own (not a terminal), with `env` and `stdin` written to it. */
async function ferryCli(args: string[], env: NodeJS.ProcessEnv, stdin?: string) {
  const p = startCliProcess(args, { FERRY_URL: ferry.url, ...env });
  p.child.stdin!.end(stdin ?? '');
  return p.done;
}

/** `ferry <args>` in this process as if at a terminal, answering its question with `answer`. */
async function atTerminal(args: string[], answer: string) {
  let out = '';
  let err = '';
  const asked: string[] = [];
  const code = await runCli(args, {
    env: { FERRY_URL: ferry.url, FERRY_TOKEN: tokens.approver },
    io: {
      out: (t) => (out += t + '\n'),
      err: (t) => (err += t + '\n'),
      interactive: true,
      ask: async (q) => {
        asked.push(q);
        return answer;
      },
    },
  });
  return { code, out, err, asked };
}

async function newMovement(template = 'api.pay'): Promise<{ id: string; compiled_plan_hash: string }> {
  const r = await callApi(ferry.url, 'POST', '/v3/movements', tokens.requester, {
    template_key: template,
    intent: { asset: 'USDC', amount: '7', destination: '0x00000000000000000000000000000000000000aa' },
  });
  assert.equal(r.status, 201, r.text);
  return r.body.movement;
}

const stateOf = async (id: string) =>
  (await db.pool.query<{ request_state: string }>('SELECT request_state FROM movement_requests WHERE id = $1', [id])).rows[0].request_state;

test('--token on the command line is refused, naming the ways that are safe; FERRY_TOKEN, a file and stdin work', async () => {
  const onLine = await ferryCli(['templates', 'list', '--token', tokens.operator], {});
  assert.equal(onLine.code, 2, onLine.stderr);
  assert.match(onLine.stderr, /--token is refused: .*FERRY_TOKEN, --token-file PATH .* or --token-file - \(standard input\)/);
  assert.ok(!onLine.stdout.includes('api.pay'), 'nothing was asked of Ferry');

  const env = await ferryCli(['templates', 'list'], { FERRY_TOKEN: tokens.operator });
  assert.equal(env.code, 0, env.stderr);
  assert.match(env.stdout, /^KEY\s+VERSION\s+UPDATED\s+DESCRIPTION/);
  assert.match(env.stdout, /api\.pay\s+1\s+\S+\s+one payment/);

  const file = join(dir, 'token');
  writeFileSync(file, tokens.operator + '\n', { mode: 0o600 });
  const fromFile = await ferryCli(['templates', 'list', '--token-file', file, '--json'], {});
  assert.equal(fromFile.code, 0, fromFile.stderr);
  assert.ok(JSON.parse(fromFile.stdout).some((t: { template_key: string }) => t.template_key === 'api.flaky'));
  assert.equal(fromFile.stderr, '');

  chmodSync(file, 0o644);
  const loose = await ferryCli(['templates', 'list', '--token-file', file], {});
  assert.equal(loose.code, 0, loose.stderr);
  assert.match(loose.stderr, /warning: .*token is readable by others \(mode 644\)/);

  const fromStdin = await ferryCli(['templates', 'list', '--token-file', '-'], {}, tokens.operator + '\n');
  assert.equal(fromStdin.code, 0, fromStdin.stderr);
  assert.match(fromStdin.stdout, /api\.pay/);

  const missing = await ferryCli(['templates', 'list', '--token-file', join(dir, 'nope')], {});
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /cannot read --token-file .*nope: ENOENT/);
});

test('approve off a terminal: refused without --plan-hash or --yes; a hash other than the plan is refused; the plan is shown first', async () => {
  const m = await newMovement();
  const bare = await ferryCli(['movements', 'approve', m.id], { FERRY_TOKEN: tokens.approver });
  assert.equal(bare.code, 2, bare.stderr);
  assert.match(bare.stderr, /not on a terminal: pass --plan-hash HASH .* or --yes/);
  assert.match(bare.stdout, /^ {4}to\s+0x0+aa$/m);
  assert.equal(await stateOf(m.id), 'PENDING_APPROVAL');

  const other = `sha256:${'0'.repeat(64)}`;
  const stale = await ferryCli(['movements', 'approve', m.id, '--plan-hash', other], { FERRY_TOKEN: tokens.approver });
  assert.equal(stale.code, 1);
  assert.match(stale.stderr, /the plan changed: you reviewed sha256:0+, the movement's plan is now sha256:/);
  assert.equal(await stateOf(m.id), 'PENDING_APPROVAL');

  const pinned = await ferryCli(['movements', 'approve', m.id, '--plan-hash', m.compiled_plan_hash], { FERRY_TOKEN: tokens.approver });
  assert.equal(pinned.code, 0, pinned.stderr);
  for (const shown of [/asset\s+USDC/, /amount\s+7/, /^ {4}to\s+0x0+aa$/m, /^ {2}node pay {2}action \(transfer\) {2}exec\.sim\.action$/m, /^ {4}fee cap\s+-$/m])
    assert.match(pinned.stdout, shown);
  assert.ok(pinned.stdout.indexOf(`plan hash  ${m.compiled_plan_hash}`) < pinned.stdout.indexOf('Approved plan'), 'shown before it is approved');
  assert.notEqual(await stateOf(m.id), 'PENDING_APPROVAL');
});

test('approve at a terminal asks, after showing the plan: no leaves it pending, yes approves the plan shown', async () => {
  const m = await newMovement();
  const no = await atTerminal(['movements', 'approve', m.id], 'no');
  assert.equal(no.code, 1);
  assert.deepEqual(no.asked, [`Approve plan ${m.compiled_plan_hash}? Type yes to approve: `]);
  assert.match(no.out, /amount\s+7/);
  assert.match(no.err, /not approved/);
  assert.equal(await stateOf(m.id), 'PENDING_APPROVAL');

  const yes = await atTerminal(['movements', 'approve', m.id], 'yes');
  assert.equal(yes.code, 0, yes.err);
  assert.match(yes.out, new RegExp(`Approved plan ${m.compiled_plan_hash} of movement ${m.id}`));
  assert.notEqual(await stateOf(m.id), 'PENDING_APPROVAL');

  // --yes skips the question (the plan is still printed).
  const skipped = await newMovement();
  const y = await atTerminal(['movements', 'approve', skipped.id, '--yes'], 'never asked');
  assert.equal(y.code, 0, y.err);
  assert.deepEqual(y.asked, []);
  assert.match(y.out, /plan hash/);
});

test('movements reject, cancel and retry over the API', async () => {
  const rejected = await newMovement();
  const r = await ferryCli(['movements', 'reject', rejected.id, '--reason', 'wrong amount'], { FERRY_TOKEN: tokens.approver });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`Rejected movement ${rejected.id}: it is REJECTED`));
  assert.equal(await stateOf(rejected.id), 'REJECTED');

  const cancelled = await newMovement();
  const c = await ferryCli(['movements', 'cancel', cancelled.id], { FERRY_TOKEN: tokens.requester });
  assert.equal(c.code, 0, c.stderr);
  assert.match(c.stdout, /it is CANCELLED/);
  const again = await ferryCli(['movements', 'cancel', cancelled.id], { FERRY_TOKEN: tokens.requester });
  assert.equal(again.code, 1);
  assert.match(again.stderr, /INVALID_TRANSITION/);

  const flaky = await newMovement('api.flaky');
  await callApi(ferry.url, 'POST', `/v3/movements/${flaky.id}/approve`, tokens.approver, { compiled_plan_hash: flaky.compiled_plan_hash });
  await waitFor('the node to fail', async () => (await db.pool.query(`SELECT 1 FROM request_nodes WHERE request_id = $1 AND node_state = 'FAILED'`, [flaky.id])).rowCount === 1);
  const noNode = await ferryCli(['movements', 'retry', flaky.id], { FERRY_TOKEN: tokens.operator });
  assert.equal(noNode.code, 2);
  assert.match(noNode.stderr, /--node KEY is required/);
  const retried = await ferryCli(['movements', 'retry', flaky.id, '--node', 'once'], { FERRY_TOKEN: tokens.operator });
  assert.equal(retried.code, 0, retried.stderr);
  assert.match(retried.stdout, /Node once is READY again in movement .*: it is EXECUTING/);
});

test('tokens list and principals list with FERRY_URL ask that Ferry (not a database); a database-only command refuses; with FERRY_URL unset it says which database it opened', async () => {
  // DATABASE_URL names a database without Ferry's tables: opening it would fail.
  const elsewhere = new URL(db.url);
  elsewhere.pathname = '/postgres';
  const listed = await ferryCli(['tokens', 'list'], { DATABASE_URL: elsewhere.toString(), FERRY_TOKEN: tokens.admin });
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /^ID\s+NAME\s+ROLE\s+PRINCIPAL\s+CREATED\s+EXPIRES\s+LAST USED\s+STATUS$/m);
  assert.match(listed.stdout, /\sapi-operator\s+operator\s+api-operator\s+\S+\s+-\s+\S+\s+active$/m);
  assert.equal(listed.stderr, '');
  // The same JSON as from the database.
  const overApi = await ferryCli(['tokens', 'list', '--json', '--all'], { DATABASE_URL: elsewhere.toString(), FERRY_TOKEN: tokens.admin });
  const direct = await ferryCli(['tokens', 'list', '--json', '--all'], { DATABASE_URL: db.url, FERRY_URL: '' });
  assert.equal(overApi.code, 0, overApi.stderr);
  assert.equal(direct.code, 0, direct.stderr);
  const stable = (text: string) => JSON.parse(text).map((t: Record<string, unknown>) => ({ ...t, last_used_at: null }));
  assert.deepEqual(stable(overApi.stdout), stable(direct.stdout));
  const people = await ferryCli(['principals', 'list', '--json'], { DATABASE_URL: elsewhere.toString(), FERRY_TOKEN: tokens.admin });
  assert.equal(people.code, 0, people.stderr);
  assert.ok(JSON.parse(people.stdout).some((p: { name: string; actor?: string }) => p.name === 'api-approver' && p.actor === undefined));
  const notAdmin = await ferryCli(['principals', 'list'], { FERRY_TOKEN: tokens.operator });
  assert.equal(notAdmin.code, 1);
  assert.match(notAdmin.stderr, /^ferry: FORBIDDEN: /);

  const r = await ferryCli(['tokens', 'revoke', '--name', 'api-operator'], { DATABASE_URL: db.url });
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /^ferry: CLI_DATABASE_ONLY: ferry tokens revoke works on a database directly, not over a Ferry's API, and FERRY_URL is set: unset it \(FERRY_URL= ferry tokens revoke\)/);
  assert.equal(r.stderr.split('\n').length, 2, 'one line');

  const unset = await ferryCli(['tokens', 'list'], { DATABASE_URL: db.url, FERRY_URL: '' });
  assert.equal(unset.code, 0, unset.stderr);
  assert.match(unset.stdout, /api-operator/);
  const u = new URL(db.url);
  assert.match(unset.stderr, new RegExp(`^ferry: tokens list: database ${u.hostname}:${u.port}${u.pathname} \\(DATABASE_URL\\)$`, 'm'));
  assert.doesNotMatch(unset.stderr, new RegExp(u.password || 'no-password-in-url'));
});
