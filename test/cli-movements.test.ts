import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createToken } from '../src/persistence/tokens.ts';
import { finalizeProposal } from '../src/services/template-proposals.ts';
import { loadConfig } from '../src/config.ts';
import { getProposal } from '../src/persistence/template-proposals.ts';
import { startCliProcess } from './helpers/cli.ts';
import { ferryForFile } from './helpers/ferry.ts';
import { deadUrl } from './helpers/net.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * `ferry templates apply` and `ferry movements ...`, run as a user runs them (a separate process)
 * against a running Ferry with its workers, on a test database.
 */

const { db, ferry } = await ferryForFile({}, { runtime: 'workers' });
const tokens = {
  operator: (await createToken(db.pool, { name: 'cli-operator', role: 'operator' })).token,
  requester: (await createToken(db.pool, { name: 'cli-requester', role: 'requester' })).token,
  approver: (await createToken(db.pool, { name: 'cli-approver', role: 'approver' })).token,
  viewer: (await createToken(db.pool, { name: 'cli-viewer', role: 'viewer' })).token,
};

/** `ferry <args>` against this file's Ferry, with `token` (or none) as FERRY_TOKEN. */
const start = (args: string[], token: string | null) => startCliProcess(args, { FERRY_URL: ferry.url, ...(token ? { FERRY_TOKEN: token } : {}) });
const ferryCli = (args: string[], token: string | null) => start(args, token).done;

const dir = mkdtempSync(join(tmpdir(), 'ferry-cli-templates-'));
const yamlFile = join(dir, 'transfer.yaml');
writeFileSync(
  yamlFile,
  `# a test plan
template_key: cli.transfer
description: withdraw, check, sweep
nodes:
  - { node_key: withdraw, node_kind: action, action_type: cex_withdrawal, executor_binding: exec.sim.action, config: { sim: { latency_ms: 100 } } }
  - { node_key: check, node_kind: observe, action_type: cex_deposit_status, executor_binding: exec.sim.observe, config: { sim: { latency_ms: 100 } } }
  - { node_key: sweep, node_kind: action, action_type: sweep, executor_binding: exec.sim.action, config: { sim: { latency_ms: 100 } } }
edges:
  - { from: withdraw, to: check }
  - { from: check, to: sweep }
`,
);

/**
 * What happens after `templates apply` printed a proposal: a second person approves it with the CLI,
 * and the finalization sweep's step runs on a clock standing at the end of the challenge window.
 */
async function makeLive(applied: string, key: string): Promise<void> {
  const proposalId = new RegExp(`template ${key.replace('.', '\\.')}: proposed \\(proposal ([0-9a-f-]{36}), PROPOSED\\)`).exec(applied)?.[1];
  assert.ok(proposalId, applied);
  const approved = await ferryCli(['templates', 'approve', proposalId], tokens.approver);
  assert.equal(approved.code, 0, approved.stderr);
  const row = (await getProposal(db.pool, proposalId))!;
  const at = new Date(row.challenge_ends_at!);
  await finalizeProposal({ pool: db.pool, config: loadConfig({}), now: () => at }, proposalId);
}

test('templates apply: YAML or JSON, a proposal per new graph, live once a second person approved it and its window passed', async () => {
  const first = await ferryCli(['templates', 'apply', yamlFile], tokens.operator);
  assert.equal(first.code, 0, first.stderr);
  await makeLive(first.stdout, 'cli.transfer');
  const again = await ferryCli(['templates', 'apply', yamlFile], tokens.operator);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /template cli\.transfer: unchanged \(version 1\)/);

  const jsonFile = join(dir, 'two.json');
  writeFileSync(
    jsonFile,
    JSON.stringify([
      { template_key: 'cli.one', nodes: [{ node_key: 'a', node_kind: 'action', action_type: 'x', executor_binding: 'exec.sim.action' }], edges: [] },
      { template_key: 'cli.two', nodes: [{ node_key: 'b', node_kind: 'action', action_type: 'y', executor_binding: 'exec.sim.action' }], edges: [] },
    ]),
  );
  const two = await ferryCli(['templates', 'apply', jsonFile, '--json'], tokens.operator);
  assert.equal(two.code, 0, two.stderr);
  assert.deepEqual(JSON.parse(two.stdout).map((r: any) => [r.proposal.template_key, r.proposal.state, r.created]), [['cli.one', 'PROPOSED', true], ['cli.two', 'PROPOSED', true]]);
});

test('templates apply: refusals are clear and change nothing', async () => {
  const bad = join(dir, 'bad.yaml');
  writeFileSync(bad, 'template_key: cli.bad\nnodes: [ {');
  const broken = await ferryCli(['templates', 'apply', bad], tokens.operator);
  assert.equal(broken.code, 1);
  assert.match(broken.stderr, /not valid YAML/);

  const cyclic = join(dir, 'cycle.yaml');
  writeFileSync(
    cyclic,
    `template_key: cli.cycle
nodes:
  - { node_key: a, node_kind: action, action_type: x, executor_binding: exec.sim.action }
  - { node_key: b, node_kind: action, action_type: x, executor_binding: exec.sim.action }
edges: [ { from: a, to: b }, { from: b, to: a } ]
`,
  );
  const refused = await ferryCli(['templates', 'apply', cyclic], tokens.operator);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /INVALID_TEMPLATE: .*cycle/i);

  const forbidden = await ferryCli(['templates', 'apply', yamlFile], tokens.requester);
  assert.equal(forbidden.code, 1);
  assert.match(forbidden.stderr, /FORBIDDEN/);
  const missing = await ferryCli(['templates', 'apply', join(dir, 'nope.yaml')], tokens.operator);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /cannot read .*nope\.yaml.*ENOENT/);
  const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM plan_templates WHERE template_key IN ('cli.cycle', 'cli.bad')`);
  assert.equal(rows[0].n, 0);
});

test('create, watch live while a second person approves, then list and show', async () => {
  const created = await ferryCli(['movements', 'create', '--template', 'cli.transfer', '--intent', '{"asset":"USDC","amount":"42"}'], tokens.requester);
  assert.equal(created.code, 0, created.stderr);
  const id = /Created movement ([0-9a-f-]{36}) \(PENDING_APPROVAL\)/.exec(created.stdout)?.[1];
  assert.ok(id, created.stdout);

  // Four-eyes: the requester cannot approve what they created.
  const self = await ferryCli(['movements', 'approve', id, '--yes'], tokens.requester);
  assert.equal(self.code, 1);
  assert.match(self.stderr, /FORBIDDEN|FOUR_EYES_VIOLATION/);

  // watch starts before the approval and follows the movement to its end.
  const watching = start(['movements', 'watch', id], tokens.viewer);
  await waitFor('watch to print the movement', () => watching.output().includes(`movement ${id}`));
  assert.match(watching.output(), /\[ \.\. \] withdraw\s+BLOCKED/);

  const approved = await ferryCli(['movements', 'approve', id, '--yes'], tokens.approver);
  assert.equal(approved.code, 0, approved.stderr);
  // What is approved is shown before the approval: each node's effect (asset, amount, ...), the hash.
  assert.match(approved.stdout, /asset\s+USDC/);
  assert.match(approved.stdout, /amount\s+42/);
  assert.match(approved.stdout, /node withdraw {2}action \(cex_withdrawal\) {2}exec\.sim\.action/);
  assert.match(approved.stdout, /plan hash\s+sha256:[0-9a-f]{64}/);
  assert.match(approved.stdout, /Approved plan sha256:[0-9a-f]+ of movement/);
  assert.match(approved.stdout, /It is APPROVED/);

  const watched = await watching.done;
  assert.equal(watched.code, 0, watched.stderr);
  for (const step of ['withdraw', 'check', 'sweep']) assert.match(watched.stdout, new RegExp(`${step}  \\S+ -> COMPLETED`), step);
  assert.match(watched.stdout, /movement {2}PENDING_APPROVAL -> APPROVED {2}APPROVE/);
  assert.match(watched.stdout, new RegExp(`movement ${id} ended COMPLETED`));
  const order = ['withdraw', 'check', 'sweep'].map((s) => watched.stdout.search(new RegExp(`${s}  \\S+ -> COMPLETED`)));
  assert.deepEqual([...order].sort((a, b) => a - b), order, 'steps completed in plan order, as they happened');

  // Watching a finished movement prints its history and ends at once.
  const finished = await ferryCli(['movements', 'watch', id, '--json'], tokens.viewer);
  assert.equal(finished.code, 0, finished.stderr);
  const history = finished.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(history[0].event_type, 'xstate.init');
  assert.equal(history[history.length - 1].to_state, 'COMPLETED');

  const listed = await ferryCli(['movements', 'list', '--state', 'completed'], tokens.viewer);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /^ID\s+STATE\s+TEMPLATE\s+NODES DONE\s+CREATED\s+BY/);
  assert.match(listed.stdout, new RegExp(`${id}\\s+COMPLETED\\s+cli\\.transfer v1\\s+3/3\\s+\\S+\\s+cli-requester`));
  const pending = await ferryCli(['movements', 'list', '--state', 'PENDING_APPROVAL', '--json'], tokens.viewer);
  assert.ok(!JSON.parse(pending.stdout).some((m: any) => m.id === id));

  const shown = await ferryCli(['movements', 'show', id], tokens.viewer);
  assert.equal(shown.code, 0, shown.stderr);
  assert.match(shown.stdout, /state\s+COMPLETED/);
  assert.match(shown.stdout, /withdraw\s+COMPLETED\s+1\s+exec\.sim\.action\s+-/);
  assert.match(shown.stdout, /check\s+COMPLETED\s+1\s+exec\.sim\.observe\s+withdraw/);
  // People are shown by their token's name, not by an id.
  assert.match(shown.stdout, /created\s+\S+ by cli-requester$/m);
  assert.match(shown.stdout, /movement {2}PENDING_APPROVAL -> APPROVED {2}APPROVE {2}by cli-approver$/m);
  assert.doesNotMatch(shown.stdout, /token:/);
  const json = JSON.parse((await ferryCli(['movements', 'show', id, '--json'], tokens.viewer)).stdout);
  assert.equal(json.movement.state, 'COMPLETED');
});

test('watch --json prints each transition as one JSON line, and a failed movement exits 1', async () => {
  const failing = join(dir, 'failing.yaml');
  writeFileSync(
    failing,
    `template_key: cli.failing
nodes:
  - { node_key: only, node_kind: action, action_type: x, executor_binding: exec.sim.action, config: { sim: { latency_ms: 50, preflight: FAILED } } }
edges: []
`,
  );
  const applied = await ferryCli(['templates', 'apply', failing], tokens.operator);
  assert.equal(applied.code, 0, applied.stderr);
  await makeLive(applied.stdout, 'cli.failing');
  const created = JSON.parse((await ferryCli(['movements', 'create', '--template', 'cli.failing', '--intent', '{}', '--json'], tokens.requester)).stdout);
  const id = created.movement.id;
  const watching = start(['movements', 'watch', id, '--json'], tokens.viewer);
  // The history comes first (creation: the request and its one step); approve once it is out.
  await waitFor('watch to print the history', () => watching.output().split('\n').filter(Boolean).length >= 2);
  assert.equal((await ferryCli(['movements', 'approve', id, '--plan-hash', created.movement.compiled_plan_hash], tokens.approver)).code, 0);
  const watched = await watching.done;
  assert.equal(watched.code, 1, 'the movement failed');
  const lines = watched.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.ok(lines.length >= 6, watched.stdout);
  assert.deepEqual(lines.slice(0, 2).map((t) => t.event_type), ['xstate.init', 'xstate.init']);
  assert.ok(lines.every((t, i) => i === 0 || t.id > lines[i - 1].id), 'in order, each once');
  assert.equal(lines[lines.length - 1].entity_type, 'request');
  assert.equal(lines[lines.length - 1].to_state, 'FAILED');
});

test('bad arguments exit 2; an unreachable Ferry or a refused token exit 1 with a clear message', async () => {
  const noToken = await ferryCli(['movements', 'list'], null);
  assert.equal(noToken.code, 2);
  assert.match(noToken.stderr, /token is required: FERRY_TOKEN, --token-file PATH/);
  const badIntent = await ferryCli(['movements', 'create', '--template', 'cli.transfer', '--intent', '{nope'], tokens.requester);
  assert.equal(badIntent.code, 2);
  assert.match(badIntent.stderr, /--intent must be JSON/);
  const arrayIntent = await ferryCli(['movements', 'create', '--template', 'cli.transfer', '--intent', '[1]'], tokens.requester);
  assert.equal(arrayIntent.code, 2);
  // A number JSON.parse would round is refused before it is sent; a float amount by the API.
  const bigNumber = await ferryCli(['movements', 'create', '--template', 'cli.transfer', '--intent', '{"asset":"USDC","amount":"1","ref":12345678901234567890}'], tokens.requester);
  assert.equal(bigNumber.code, 2, bigNumber.stderr);
  assert.match(bigNumber.stderr, /--intent: ref is the number 12345678901234567890, which JSON cannot carry exactly; write it as a string/);
  const floatAmount = await ferryCli(['movements', 'create', '--template', 'cli.transfer', '--intent', '{"asset":"USDC","amount":1.5}'], tokens.requester);
  assert.equal(floatAmount.code, 1, floatAmount.stderr);
  assert.match(floatAmount.stderr, /INTENT_INVALID: .*"amount"/);
  const badId = await ferryCli(['movements', 'show', 'not-an-id'], tokens.viewer);
  assert.equal(badId.code, 2);
  const unknown = await ferryCli(['movements', 'show', '00000000-0000-0000-0000-000000000000'], tokens.viewer);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /NOT_FOUND/);
  const refused = await ferryCli(['movements', 'list'], 'fy_' + 'x'.repeat(43));
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /UNAUTHENTICATED: .*check FERRY_TOKEN or --token-file/);

  const down = await ferryCli(['movements', 'list', '--url', await deadUrl()], tokens.viewer);
  assert.equal(down.code, 1);
  assert.match(down.stderr, /cannot reach Ferry at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
  for (const r of [noToken, badIntent, unknown, refused, down]) assert.doesNotMatch(r.stderr, /\n\s+at .+:\d+/, 'no stack trace');
});
