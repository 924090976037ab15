/**
 * Standing orders end to end (docs/policy.md, "Standing orders"): proposed and approved through
 * /v3, run by the standing order service as the standing_orders sweep runs it, over balance
 * snapshots written by the test. A run is created once per crossing whatever restarts or how many
 * runners there are; a run above the order's maximum per run waits for people; a paused order runs
 * nothing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from '../src/cli/run.ts';
import { collectingDeps } from './helpers/fixtures.ts';
import { getPolicyProposal } from '../src/persistence/policy.ts';
import { finalizePolicyProposal } from '../src/services/policy.ts';
import { runStandingOrders, type StandingOrderDeps } from '../src/services/standing-orders.ts';
import { loadConfig } from '../src/config.ts';
import { registry } from '../src/metrics.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { callApi, type Reply } from './helpers/http.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';

const { db, ferry } = await ferryForFile({}, { runtime: 'api' });
const tokens = await createTokens(db.pool, {
  operator: 'operator',
  requester: 'requester',
  approver: 'approver',
  approver2: { name: 'approver-2', role: 'approver' },
  admin: 'admin',
});
type Who = keyof typeof tokens;
const call = (method: string, path: string, who: Who, body?: unknown): Promise<Reply> => callApi(ferry.url, method, path, tokens[who].token, body);

await makeTemplateLive(
  ferry.url,
  db.pool,
  { template_key: 'treasury.sweep', nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'transfer', executor_binding: 'exec.sim.action' }], edges: [] },
  { proposer: tokens.operator.token, approver: tokens.approver.token },
);

async function finalize(id: string) {
  const row = (await getPolicyProposal(db.pool, id))!;
  await finalizePolicyProposal({ pool: db.pool, now: () => new Date(row.challenge_ends_at!) }, id);
}
const cold = await call('POST', '/v3/policy/address-book', 'operator', { name: 'cold', network: 'sim', address: 'cold-vault', owner: 'treasury', kind: 'internal' });
assert.equal(cold.status, 202, cold.text);
await call('POST', `/v3/policy/proposals/${cold.body.id}/approve`, 'approver', {});
await finalize(cold.body.id);
const rules = await call('POST', '/v3/policy/rules', 'operator', { rules: [{ id: 'sweeps', match: { destination: { entries: ['cold'] } }, action: { type: 'allow' } }] });
await call('POST', `/v3/policy/proposals/${rules.body.id}/approve`, 'approver', {});
await finalize(rules.body.id);

/** A fresh service deps, as a (re)started process builds them. */
const runner = (): StandingOrderDeps => ({ pool: db.pool, config: loadConfig({ FERRY_DATA_DIR: '.ferry/test-standing' }), transitions: collectingDeps() });

const HOT = { chain: 'sim', wallet: 'hot', asset: 'USDC' };
/** A balance snapshot of the hot wallet, in USDC (6 decimals). */
async function balance(usdc: number) {
  await db.pool.query(`INSERT INTO balance_snapshots (chain, wallet, asset, amount, decimals) VALUES ($1, $2, $3, $4, 6)`, [HOT.chain, HOT.wallet, HOT.asset, String(BigInt(usdc) * 1_000_000n)]);
}

async function activeOrder(name: string, extra: Record<string, unknown> = {}) {
  const p = await call('POST', '/v3/standing-orders', 'operator', {
    name,
    template_key: 'treasury.sweep',
    asset: 'USDC',
    destinations: ['cold'],
    max_per_run: '500',
    max_per_window: '100000',
    window_seconds: 86400,
    trigger: { kind: 'ceiling', balance: HOT, ceiling: '1000' },
    expires_at: new Date(Date.now() + 30 * 86400_000).toISOString(),
    ...extra,
  });
  assert.equal(p.status, 202, p.text);
  assert.equal(p.body.state, 'PROPOSED');
  assert.equal(p.body.required_approvals, 1);
  const self = await call('POST', `/v3/standing-orders/${p.body.id}/approve`, 'operator', {});
  assert.equal(self.status, 403, 'the proposer never approves its own order');
  const a = await call('POST', `/v3/standing-orders/${p.body.id}/approve`, 'approver', {});
  assert.equal(a.status, 200, a.text);
  assert.equal(a.body.state, 'ACTIVE');
  return p.body.id as string;
}

async function runsOf(id: string) {
  const d = await call('GET', `/v3/standing-orders/${id}`, 'requester');
  assert.equal(d.status, 200, d.text);
  return d.body.runs as { slot_key: string; amount: string; outcome: string; movement_id: string | null; error_code: string | null }[];
}

async function movementsOf(id: string) {
  const { rows } = await db.pool.query(`SELECT id, request_state, intent, approvals FROM movement_requests WHERE created_by = $1 ORDER BY created_at`, [`standing-order:${id}`]);
  return rows;
}

/** ferry_standing_order_runs_total of one outcome, in this process. */
async function runsCounted(outcome: string): Promise<number> {
  return (await registry.getSingleMetric('ferry_standing_order_runs_total')!.get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
}

test('a balance above its ceiling is swept once per crossing, across a restart and two concurrent runners', async () => {
  const id = await activeOrder('hot-sweep');
  await balance(900);
  assert.equal((await runStandingOrders(runner())).created, 0, 'below the ceiling: nothing');

  await balance(1200);
  const first = await runStandingOrders(runner());
  assert.equal(first.created, 1);
  assert.equal(first.approved, 1);
  // A restart: the same crossing, a new process, nothing new.
  assert.equal((await runStandingOrders(runner())).created, 0);
  await balance(1250); // still the same excursion above the ceiling
  assert.equal((await runStandingOrders(runner())).created, 0);

  let runs = await runsOf(id);
  assert.equal(runs.length, 1);
  assert.equal(runs[0].outcome, 'approved');
  assert.equal(runs[0].amount, '200');
  let movements = await movementsOf(id);
  assert.equal(movements.length, 1);
  assert.equal(movements[0].request_state, 'APPROVED', 'approved by the standing order');
  assert.equal(movements[0].intent.amount, '200');
  assert.equal(movements[0].intent.destination, 'cold-vault');
  const audit = await db.pool.query(`SELECT details FROM audit_outbox WHERE action = 'movement.approve' AND entity_id = $1`, [movements[0].id]);
  assert.equal(audit.rows[0].details.standing_order_id, id, 'recorded as approved under the standing order');

  // The sweep moved it; a new crossing, and two runners at once: one run.
  await balance(1000);
  await balance(1400);
  const both = await Promise.all([runStandingOrders(runner()), runStandingOrders(runner())]);
  assert.equal(both[0].created + both[1].created, 1, JSON.stringify(both));
  runs = await runsOf(id);
  assert.equal(runs.length, 2);
  movements = await movementsOf(id);
  assert.equal(movements.length, 2, 'one movement per crossing');
  assert.equal(movements[1].intent.amount, '400');
  await call('POST', `/v3/standing-orders/${id}/revoke`, 'operator', {});
});

test('a run above its maximum per run waits for people; a paused order runs nothing until resumed', async () => {
  await balance(900);
  const id = await activeOrder('hot-sweep-2');
  await balance(1800); // 800 above the ceiling, max_per_run 500
  const waitingBefore = await runsCounted('waiting');
  const r = await runStandingOrders(runner());
  assert.equal(r.waiting, 1, JSON.stringify(r));
  assert.equal((await runsCounted('waiting')) - waitingBefore, 1, 'ferry_standing_order_runs_total{outcome="waiting"}');
  const runs = await runsOf(id);
  assert.equal(runs[0].outcome, 'waiting');
  assert.equal(runs[0].error_code, 'STANDING_ORDER_ABOVE_MAX_PER_RUN');
  const [m] = await movementsOf(id);
  assert.equal(m.request_state, 'PENDING_APPROVAL');
  assert.equal(m.approvals.length, 0);

  const paused = await call('POST', `/v3/standing-orders/${id}/pause`, 'operator', { reason: 'maintenance' });
  assert.equal(paused.status, 200, paused.text);
  assert.equal(paused.body.state, 'PAUSED');
  const scraped = await callApi(ferry.url, 'GET', '/metrics', tokens.admin.token);
  assert.equal(scraped.status, 200, scraped.text);
  assert.match(scraped.text, /^ferry_standing_orders\{state="PAUSED"\} [1-9]\d*$/m);
  assert.match(scraped.text, /^ferry_standing_orders\{state="EXPIRED"\} \d+$/m, 'every state has a series');
  await balance(900);
  await balance(1300);
  assert.equal((await runStandingOrders(runner())).created, 0, 'paused: no run');
  assert.equal((await runsOf(id)).length, 1);

  const resumed = await call('POST', `/v3/standing-orders/${id}/resume`, 'operator', {});
  assert.equal(resumed.body.state, 'ACTIVE');
  const approvedBefore = await runsCounted('approved');
  const after = await runStandingOrders(runner());
  assert.equal(after.approved, 1, JSON.stringify(after));
  assert.equal((await runsCounted('approved')) - approvedBefore, 1);
  assert.equal((await runsOf(id)).length, 2);
  await call('POST', `/v3/standing-orders/${id}/revoke`, 'operator', {});
});

test('a standing order to a destination outside the address book is refused', async () => {
  const outside = await call('POST', '/v3/standing-orders', 'operator', {
    name: 'nowhere',
    template_key: 'treasury.sweep',
    asset: 'USDC',
    destinations: ['unknown'],
    max_per_run: '5',
    max_per_window: '5',
    window_seconds: 3600,
    trigger: { kind: 'schedule', schedule: { cron: '0 * * * *', time_zone: 'Europe/Paris' }, amount: '5' },
    expires_at: new Date(Date.now() + 86400_000).toISOString(),
  });
  assert.equal(outside.status, 422, outside.text);
  assert.equal(outside.body.error.code, 'STANDING_ORDER_INVALID');
});

test('ferry standing-orders list, show and pause through the API', async () => {
  const id = await activeOrder('cli-sweep');
  const cli = async (...args: string[]) => {
    let out = '';
    const code = await runCli(['standing-orders', ...args], {
      env: { FERRY_URL: ferry.url, FERRY_TOKEN: tokens.operator.token },
      io: { out: (t) => (out += t + '\n'), err: (t) => (out += t + '\n') },
    });
    return { code, out };
  };
  const listed = await cli('list', '--state', 'active');
  assert.equal(listed.code, 0, listed.out);
  assert.match(listed.out, /cli-sweep\s+ACTIVE/);
  const shown = await cli('show', 'cli-sweep');
  assert.equal(shown.code, 0, shown.out);
  assert.match(shown.out, /sweep sim\/hot\/USDC above 1000 on each crossing/);
  assert.match(shown.out, /APPROVE PROPOSED -> ACTIVE/);
  const paused = await cli('pause', id, '--reason', 'audit');
  assert.equal(paused.code, 0, paused.out);
  assert.match(paused.out, /cli-sweep\s+PAUSED/);
  assert.equal((await cli('reject', id)).code, 2, 'reject without --reason is a usage error');
});

test('what /ui\'s standing orders page reads and does: the list, one order with its runs and history, approve (refused to its proposer), pause and resume', async () => {
  await balance(900);
  // Proposed by an admin, who may also approve orders: only four-eyes stops it approving its own.
  const p = await call('POST', '/v3/standing-orders', 'admin', {
    name: 'ui-sweep',
    template_key: 'treasury.sweep',
    asset: 'USDC',
    destinations: ['cold'],
    max_per_run: '500',
    max_per_window: '100000',
    window_seconds: 86400,
    trigger: { kind: 'ceiling', balance: HOT, ceiling: '1000' },
    expires_at: new Date(Date.now() + 30 * 86400_000).toISOString(),
  });
  assert.equal(p.status, 202, p.text);
  const id: string = p.body.id;
  // The list the page draws (any role may read it), filtered by state as its select asks.
  const list = await call('GET', '/v3/standing-orders?limit=100&state=PROPOSED', 'requester');
  assert.equal(list.status, 200, list.text);
  const listed = list.body.standing_orders.find((o: { id: string }) => o.id === id);
  assert.ok(listed, 'the proposed order is listed under PROPOSED');
  for (const field of ['id', 'name', 'state', 'template_key', 'asset', 'destinations', 'trigger']) assert.ok(field in listed, field);
  assert.deepEqual(listed.trigger, { kind: 'ceiling', balance: HOT, ceiling: '1000' });
  assert.equal((await call('GET', '/v3/standing-orders?limit=100&state=ACTIVE', 'requester')).body.standing_orders.some((o: { id: string }) => o.id === id), false);

  // The page's approve button: its proposer is refused with a code the page shows; the requester role may not approve at all.
  const self = await call('POST', `/v3/standing-orders/${id}/approve`, 'admin', {});
  assert.equal(self.status, 403);
  assert.equal(self.body.error.code, 'FOUR_EYES_VIOLATION');
  const role = await call('POST', `/v3/standing-orders/${id}/approve`, 'operator', {});
  assert.equal(role.status, 403);
  assert.equal(role.body.error.code, 'FORBIDDEN');
  const ok = await call('POST', `/v3/standing-orders/${id}/approve`, 'approver', {});
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.body.state, 'ACTIVE');
  assert.deepEqual(ok.body.approvals.map((a: { by_name: string }) => a.by_name), ['approver-1']);
  assert.equal(ok.body.required_approvals, 1);

  await balance(1300);
  assert.equal((await runStandingOrders(runner())).approved, 1);
  const detail = await call('GET', `/v3/standing-orders/${id}`, 'requester');
  assert.equal(detail.status, 200, detail.text);
  for (const field of ['proposed_by_name', 'created_at', 'expires_at', 'max_per_run', 'max_per_window', 'window_seconds', 'approvals', 'required_approvals', 'reason']) {
    assert.ok(field in detail.body.standing_order, field);
  }
  const [run] = detail.body.runs;
  assert.deepEqual(
    { amount: run.amount, destination_entry: run.destination_entry, outcome: run.outcome, error_code: run.error_code },
    { amount: '300', destination_entry: 'cold', outcome: 'approved', error_code: null },
  );
  for (const field of ['id', 'slot_key', 'created_at', 'error_detail']) assert.ok(field in run, field);
  assert.match(run.movement_id, /^[0-9a-f-]{36}$/, 'the page links the run to its movement');
  assert.deepEqual(detail.body.history.map((h: { from: string; to: string; event: string }) => [h.from, h.to, h.event]), [['', 'PROPOSED', 'xstate.init'], ['PROPOSED', 'ACTIVE', 'APPROVE']]);
  for (const field of ['seq', 'at', 'actor']) assert.ok(field in detail.body.history[1], field);

  // Pause and resume, with the empty body the page sends.
  assert.equal((await call('POST', `/v3/standing-orders/${id}/pause`, 'operator', {})).body.state, 'PAUSED');
  assert.equal((await call('POST', `/v3/standing-orders/${id}/resume`, 'operator', {})).body.state, 'ACTIVE');
  await call('POST', `/v3/standing-orders/${id}/revoke`, 'operator', {});
});
