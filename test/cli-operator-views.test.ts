/**
 * The CLI for what operators see and keep in /v3: `ferry notify channels ...` (operator channels,
 * admin only, the secret read from a file or standard input and never printed), `ferry
 * cex-transfers list` (exchange transfers no movement made), `ferry registry-drift list` (on-chain
 * facts the chain contradicts) and `ferry attention list | waiting-too-long`. Run against the API over real HTTP, in this process and as a process of its own.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { newWebhookSecret } from '../src/callbacks/signing.ts';
import { runCli } from '../src/cli/run.ts';
import { recordForeignTransfer } from '../src/persistence/cex-transfers.ts';
import { insertAttention } from '../src/persistence/notifications.ts';
import { observeRegistryDrift, recordRegistryCheck, resolveRegistryDrift } from '../src/persistence/registry-drifts.ts';
import { followUpWaitingMovements } from '../src/services/followups.ts';
import { appForFile } from './helpers/app.ts';
import { startCliProcess } from './helpers/cli.ts';
import { LOOPBACK_NETWORKS } from './helpers/destinations.ts';
import { callerFor, expectStatus, serveApp } from './helpers/http.ts';
import { CallbackReceiver } from './helpers/receiver.ts';
import { makeTemplateLive } from './helpers/templates.ts';
import { createTokens } from './helpers/tokens.ts';

const { db, app, config } = await appForFile(
  {
    FERRY_CALLBACK_ALLOWED_NETWORKS: LOOPBACK_NETWORKS,
    FERRY_NOTIFY_CHANNELS: JSON.stringify([{ name: 'cfg-slack', kind: 'slack', url: 'http://127.0.0.1:9/services/T/B/cfgtoken' }]),
    FERRY_CAPITAL_TRANSFER_FOLLOWUP_AFTER_SECONDS: '600',
  },
  { workers: false },
);
const tokens = await createTokens(db.pool, { admin: 'admin', operator: 'operator', viewer: 'viewer', requester: 'requester', approver: 'approver' });
const call = callerFor(app, tokens);
const { url } = await serveApp(app);
const rx = await new CallbackReceiver().listen();
after(() => rx.close());
const dir = mkdtempSync(join(tmpdir(), 'ferry-cli-views-'));

/** `ferry <args>` in this process, as `who`, with `stdin` for a `-` file. */
async function ferry(args: string[], who: keyof typeof tokens = 'admin', stdin?: string) {
  let out = '';
  let err = '';
  const code = await runCli(args, {
    env: { FERRY_URL: url, FERRY_TOKEN: tokens[who].token },
    io: { out: (t) => (out += t + '\n'), err: (t) => (err += t + '\n'), interactive: false, ...(stdin === undefined ? {} : { readStdin: async () => stdin }) },
  });
  return { code, out, err };
}

describe('ferry notify channels', () => {
  const secret = newWebhookSecret();
  const secretFile = join(dir, 'hook.secret');
  writeFileSync(secretFile, secret + '\n', { mode: 0o600 });

  test('create, list, show, update, disable, enable and delete; the secret is read from a file and never printed', async () => {
    const made = await ferry(['notify', 'channels', 'create', 'ops-hook', '--kind', 'webhook', '--channel-url', rx.url('/hook'), '--secret-file', secretFile, '--rate-limit-per-minute', '12']);
    assert.equal(made.code, 0, made.err);
    assert.match(made.out, /Added operator channel "ops-hook" \(webhook\)/);

    const slack = await ferry(['notify', 'channels', 'create', 'ops-slack', '--kind', 'slack', '--channel-url', rx.url('/services/T1/B1/slacktoken9'), '--disabled']);
    assert.equal(slack.code, 0, slack.err);
    assert.match(slack.out, /\(slack, disabled\)/);

    const list = await ferry(['notify', 'channels', 'list']);
    assert.equal(list.code, 0, list.err);
    assert.match(list.out, /^NAME\s+KIND\s+SOURCE\s+ENABLED\s+RATE\/MIN\s+DEDUP S\s+URL$/m);
    assert.match(list.out, /^cfg-slack\s+slack\s+config\s+yes\s+30\s+3600\s+http:\/\/127\.0\.0\.1:9\/…$/m);
    assert.match(list.out, /^ops-hook\s+webhook\s+api\s+yes\s+12\s+3600\s+http:\/\/127\.0\.0\.1:\d+\/hook$/m);
    assert.match(list.out, /^ops-slack\s+slack\s+api\s+no\s+/m);
    const json = await ferry(['notify', 'channels', 'list', '--json']);
    assert.deepEqual(JSON.parse(json.out).map((c: any) => c.name), ['cfg-slack', 'ops-hook', 'ops-slack']);

    const shown = await ferry(['notify', 'channels', 'show', 'ops-hook']);
    assert.equal(shown.code, 0, shown.err);
    assert.match(shown.out, /^Operator channel ops-hook \(webhook, made through the API\)$/m);
    assert.match(shown.out, /^ {2}secret\s+set \(/m);
    assert.match(shown.out, /^ {2}rate limit\s+12 per minute$/m);

    // A new secret from standard input, and a setting.
    const next = newWebhookSecret();
    const updated = await ferry(['notify', 'channels', 'update', 'ops-hook', '--secret-file', '-', '--dedup-seconds', '60'], 'admin', next + '\n');
    assert.equal(updated.code, 0, updated.err);
    assert.match(updated.out, /^ {2}dedup window\s+60 s$/m);

    const off = await ferry(['notify', 'channels', 'disable', 'ops-hook']);
    assert.equal(off.code, 0, off.err);
    assert.match(off.out, /"ops-hook" is disabled/);
    assert.match((await ferry(['notify', 'channels', 'enable', 'ops-hook'])).out, /"ops-hook" is enabled/);

    const ro = await ferry(['notify', 'channels', 'disable', 'cfg-slack']);
    assert.equal(ro.code, 1);
    assert.match(ro.err, /OPERATOR_CHANNEL_READ_ONLY: operator channel cfg-slack is configured in FERRY_NOTIFY_CHANNELS/);
    const dup = await ferry(['notify', 'channels', 'create', 'ops-hook', '--kind', 'slack', '--channel-url', rx.url('/x')]);
    assert.equal(dup.code, 1);
    assert.match(dup.err, /OPERATOR_CHANNEL_EXISTS/);

    const del = await ferry(['notify', 'channels', 'delete', 'ops-slack']);
    assert.equal(del.code, 0, del.err);
    assert.match(del.out, /Deleted operator channel "ops-slack"/);
    assert.ok(!(await ferry(['notify', 'channels', 'list'])).out.includes('ops-slack'));

    for (const r of [made, slack, list, json, shown, updated, off, ro, dup, del]) {
      for (const s of [secret, next, 'slacktoken9', 'cfgtoken']) assert.ok(!(r.out + r.err).includes(s), 'a secret was printed');
    }
  });

  test('usage mistakes exit 2 before anything is asked; a token of another role is refused (FORBIDDEN)', async () => {
    const noSecret = await ferry(['notify', 'channels', 'create', 'x', '--kind', 'webhook', '--channel-url', rx.url()]);
    assert.equal(noSecret.code, 2);
    assert.match(noSecret.err, /a webhook channel needs --secret-file PATH\|-/);
    const noKind = await ferry(['notify', 'channels', 'create', 'x', '--channel-url', rx.url()]);
    assert.equal(noKind.code, 2);
    assert.match(noKind.err, /--kind webhook or --kind slack is required/);
    const nothing = await ferry(['notify', 'channels', 'update', 'ops-hook']);
    assert.equal(nothing.code, 2);
    assert.match(nothing.err, /nothing to change/);
    const bothStdin = await ferry(['notify', 'channels', 'update', 'ops-hook', '--secret-file', '-', '--token-file', '-'], 'admin', 'x');
    assert.equal(bothStdin.code, 2);
    const badNumber = await ferry(['notify', 'channels', 'update', 'ops-hook', '--max-attempts', 'many']);
    assert.equal(badNumber.code, 2);
    assert.match(badNumber.err, /--max-attempts must be a whole number/);
    const tooMany = await ferry(['notify', 'channels', 'update', 'ops-hook', '--max-attempts', '1000']);
    assert.equal(tooMany.code, 1);
    assert.match(tooMany.err, /VALIDATION_FAILED/);
    const badUrl = await ferry(['notify', 'channels', 'update', 'ops-hook', '--channel-url', 'http://10.9.9.9/x']);
    assert.equal(badUrl.code, 1);
    assert.match(badUrl.err, /CALLBACK_ADDRESS_NOT_ALLOWED/);

    for (const who of ['operator', 'viewer'] as const) {
      const r = await ferry(['notify', 'channels', 'list'], who);
      assert.equal(r.code, 1, who);
      assert.match(r.err, /FORBIDDEN/);
      const d = await ferry(['notify', 'channels', 'delete', 'ops-hook'], who);
      assert.equal(d.code, 1);
    }
    assert.equal((await call('GET', '/v3/operator-channels/ops-hook', 'admin')).status, 200, 'still there');
  });

  test('as a process of its own: the secret from standard input', async () => {
    const s = newWebhookSecret();
    const p = startCliProcess(['notify', 'channels', 'create', 'proc-hook', '--kind', 'webhook', '--channel-url', rx.url('/p'), '--secret-file', '-', '--json'], {
      FERRY_URL: url,
      FERRY_TOKEN: tokens.admin.token,
    });
    p.child.stdin!.end(s + '\n');
    const r = await p.done;
    assert.equal(r.code, 0, r.stderr);
    const c = JSON.parse(r.stdout);
    assert.equal(c.name, 'proc-hook');
    assert.equal(c.has_secret, true);
    assert.ok(!r.stdout.includes(s) && !r.stderr.includes(s));
  });
});

describe('ferry cex-transfers list', () => {
  test('lists the transfers no movement made, newest first, by venue; --json gives the API answer', async () => {
    const empty = await ferry(['cex-transfers', 'list'], 'viewer');
    assert.equal(empty.code, 0, empty.err);
    assert.match(empty.out, /^No exchange transfer that no movement made\.$/m);
    const base = { asset: 'USDC', network: 'ETH', address: '0xabc', provider_status: 'ok' };
    await recordForeignTransfer(db.pool, { ...base, venue: 'binance-main', direction: 'deposit', provider_id: 'd1', amount: '1500.25', tx_id: '0xdep1', occurred_at: new Date('2026-01-02T10:00:00Z') });
    await recordForeignTransfer(db.pool, { ...base, venue: 'binance-main', direction: 'withdrawal', provider_id: 'w1', amount: '20', tx_id: null, network: null, occurred_at: new Date('2026-01-03T10:00:00Z') });
    await recordForeignTransfer(db.pool, { ...base, venue: 'kraken-ops', direction: 'deposit', provider_id: 'd2', amount: '7', tx_id: '0xdep2', occurred_at: new Date('2026-01-01T10:00:00Z') });

    const all = await ferry(['cex-transfers', 'list'], 'viewer');
    assert.equal(all.code, 0, all.err);
    const lines = all.out.trim().split('\n');
    assert.match(lines[0], /^VENUE\s+DIRECTION\s+ASSET\s+AMOUNT\s+NETWORK\s+TX\s+OCCURRED\s+STATUS$/);
    assert.match(lines[1], /^binance-main\s+withdrawal\s+USDC\s+20\s+-\s+-\s+2026-01-03T10:00:00\.000Z\s+ok$/);
    assert.match(lines[2], /^binance-main\s+deposit\s+USDC\s+1500\.25\s+ETH\s+0xdep1\s+2026-01-02T10:00:00\.000Z\s+ok$/);
    assert.match(lines[3], /^kraken-ops\s+deposit/);
    assert.equal(lines.length, 4);

    const one = await ferry(['cex-transfers', 'list', '--venue', 'kraken-ops', '--json'], 'viewer');
    assert.equal(one.code, 0, one.err);
    assert.deepEqual(JSON.parse(one.out).map((t: any) => [t.venue, t.provider_id, t.amount]), [['kraken-ops', 'd2', '7']]);
    const limited = await ferry(['cex-transfers', 'list', '--limit', '1', '--json'], 'viewer');
    assert.equal(JSON.parse(limited.out).length, 1);
    const none = await ferry(['cex-transfers', 'list', '--venue', 'okx'], 'viewer');
    assert.match(none.out, /^No transfer on okx that no movement made\.$/m);
    const bad = await ferry(['cex-transfers', 'list', '--venue', 'no spaces'], 'viewer');
    assert.equal(bad.code, 1);
    assert.match(bad.err, /VALIDATION_FAILED/);
    const badLimit = await ferry(['cex-transfers', 'list', '--limit', '0'], 'viewer');
    assert.equal(badLimit.code, 2);
  });
});

describe('ferry registry-drift list', () => {
  test('lists open drifts by default, resolved or all on request, by lane; the unverified facts after them; --json gives the API answer', async () => {
    const empty = await ferry(['registry-drift', 'list'], 'viewer');
    assert.equal(empty.code, 0, empty.err);
    assert.match(empty.out, /^No open registry drift\.$/m);
    const fact = { chain_id: 1, address: '0x00000000000000000000000000000000000000aa' };
    await observeRegistryDrift(db.pool, { ...fact, lane: 'evm', subject: 'evm.tokens[USDC]', property: 'decimals()', expected: '18', observed: '6' });
    await observeRegistryDrift(db.pool, { ...fact, lane: 'cctp', subject: 'evm.chains[1].cctp.message_transmitter', property: 'localDomain()', expected: '7', observed: '0' });
    await resolveRegistryDrift(db.pool, { lane: 'cctp', chain_id: 1, subject: 'evm.chains[1].cctp.message_transmitter', property: 'localDomain()' });
    await recordRegistryCheck(db.pool, { ...fact, lane: 'usdt0', subject: 'usdt0.deployments[30101].oft', property: 'code', expected: 'code', outcome: 'unverified', observed: null, error_code: 'RPC_TIMEOUT' });

    const open = await ferry(['registry-drift', 'list'], 'viewer');
    assert.equal(open.code, 0, open.err);
    const lines = open.out.trim().split('\n');
    assert.match(lines[0]!, /^ID\s+LANE\s+CHAIN\s+SUBJECT\s+PROPERTY\s+EXPECTED\s+OBSERVED\s+FIRST SEEN\s+LAST SEEN\s+RESOLVED$/);
    assert.match(lines[1]!, /^\d+\s+evm\s+1\s+evm\.tokens\[USDC\]\s+decimals\(\)\s+18\s+6\s+\S+\s+\S+\s+-$/);
    assert.match(open.out, /^Unverified \(the chain gave no usable answer at the last check\): 1$/m);
    assert.match(open.out, /^  usdt0 chain 1 usdt0\.deployments\[30101\]\.oft code: RPC_TIMEOUT at /m);
    const all = await ferry(['registry-drift', 'list', '--state', 'all', '--json'], 'viewer');
    const answer = JSON.parse(all.out);
    assert.deepEqual(answer.drifts.map((d: any) => [d.lane, d.resolution]), [['evm', null], ['cctp', 'matched']]);
    assert.deepEqual(answer.unverified.map((u: any) => u.error_code), ['RPC_TIMEOUT']);
    const cctp = await ferry(['registry-drift', 'list', '--lane', 'cctp', '--state', 'resolved', '--json'], 'viewer');
    assert.deepEqual(JSON.parse(cctp.out).drifts.map((d: any) => d.property), ['localDomain()']);
    assert.equal((await ferry(['registry-drift', 'list', '--state', 'sideways'], 'viewer')).code, 2);
    assert.equal((await ferry(['registry-drift', 'list', '--lane', 'No Lane'], 'viewer')).code, 2);
  });
});

describe('ferry attention', () => {
  test('waiting-too-long lists the movements capital_transfer_followup surfaced, and attention list their events', async () => {
    const none = await ferry(['attention', 'waiting-too-long'], 'viewer');
    assert.equal(none.code, 0, none.err);
    assert.match(none.out, /^No movement is waiting too long\.$/m);

    await makeTemplateLive(app, db.pool, { template_key: 'cli-wait', nodes: [{ node_key: 'a', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' }] }, {
      proposer: tokens.operator.token,
      approver: tokens.approver.token,
    });
    const r = await call('POST', '/v3/movements', 'requester', { template_key: 'cli-wait', intent: { amount: '1' } });
    expectStatus(r, 201);
    const m = r.body.movement;
    await db.pool.query(`UPDATE movement_requests SET created_at = created_at - interval '601 seconds' WHERE id = $1`, [m.id]);
    assert.equal((await followUpWaitingMovements({ pool: db.pool, config }, { batchSize: 10 })).surfaced, 1);

    const w = await ferry(['attention', 'waiting-too-long'], 'viewer');
    assert.equal(w.code, 0, w.err);
    assert.match(w.out, /^MOVEMENT\s+TEMPLATE\s+STATE\s+REASON\s+NODE\s+WAITING SINCE\s+AGE S$/m);
    assert.match(w.out, new RegExp(`^${m.id}\\s+cli-wait\\s+PENDING_APPROVAL\\s+approval_not_given\\s+-\\s+\\S+\\s+600$`, 'm'));
    const wj = await ferry(['attention', 'waiting-too-long', '--json'], 'viewer');
    assert.deepEqual(JSON.parse(wj.out).map((x: any) => [x.movement_id, x.reason]), [[m.id, 'approval_not_given']]);

    await insertAttention(db.pool, { kind: 'drift', sourceKey: 'cli-test:1', dedupKey: 'drift:cli', summary: 'drift on something', details: {} });
    const events = await ferry(['attention', 'list', '--kind', 'waiting_too_long'], 'viewer');
    assert.equal(events.code, 0, events.err);
    assert.match(events.out, new RegExp(`waiting_too_long\\s+\\S+\\s+${m.id}\\s+-\\s+`));
    assert.ok(!events.out.includes('drift on something'), 'only the kind asked for');
    const allEvents = await ferry(['attention', 'list', '--json'], 'viewer');
    assert.deepEqual(JSON.parse(allEvents.out).map((e: any) => e.kind).sort(), ['drift', 'waiting_too_long']);
    const badKind = await ferry(['attention', 'list', '--kind', 'nonsense'], 'viewer');
    assert.equal(badKind.code, 1);
    assert.match(badKind.err, /VALIDATION_FAILED/);
  });
});
