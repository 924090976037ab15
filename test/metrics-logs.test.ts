import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import pino from 'pino';
import { scratchDatabase } from './helpers/db.ts';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { seedMovement } from './helpers/fixtures.ts';
import { approvedMovement, drain, plan, runtimeDeps, simNode, snapshot } from './helpers/runtime.ts';

/** Structured logs: worker lines about a node say which request, node, worker and attempt. */

const root = fileURLToPath(new URL('..', import.meta.url));

function capture() {
  const lines: Record<string, any>[] = [];
  const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { lines, logger };
}

test('dispatcher, observer and recovery lines carry movement_id, node_id, worker and attempt, as the transition lines do', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const { lines, logger } = capture();
  deps.log = logger;

  // The unsure step comes first: an UNKNOWN after another step's side effect would stop the
  // movement for a person (MANUAL_INTERVENTION) instead of leaving it to recovery.
  const template = plan('logs-plan', [
    simNode('unsure', { submit: ['UNKNOWN'] }),
    simNode('send', {}),
    { ...simNode('wait', {}), node_kind: 'observe', executor_binding: 'exec.sim.observe' },
  ], [{ from: 'unsure', to: 'send' }, { from: 'send', to: 'wait' }]);
  const id = await approvedMovement(deps, template);
  await drain(deps);
  const s = await snapshot(db.pool, id);
  assert.equal(s.movement.request_state, 'COMPLETED', 'recovery resolved the unknown submit');

  const about = (worker: string, msg: string) => lines.filter((l) => l.worker === worker && l.msg === msg);
  const submitting = about('dispatcher', 'submitting');
  const observed = about('observer', 'observed');
  const recovered = about('recovery', 'recovered');
  assert.equal(submitting.length, 3, 'one submit per node');
  assert.equal(observed.length, 1);
  assert.equal(recovered.length, 1);
  for (const l of [...submitting, ...observed, ...recovered]) {
    assert.equal(l.movement_id, id, JSON.stringify(l));
    assert.ok(!('request_id' in l), 'movement, not request');
    const node = Object.values(s.byKey).find((n) => n.id === l.node_id);
    assert.ok(node, `node_id names a node of the movement: ${JSON.stringify(l)}`);
    assert.equal(l.node_key, node!.node_key);
    assert.equal(l.attempt, 1, JSON.stringify(l));
  }
  assert.equal(observed[0].node_key, 'wait');
  assert.equal(recovered[0].node_key, 'unsure');
  assert.equal(recovered[0].from_state, 'UNKNOWN');
  assert.equal(recovered[0].next_state, 'COMPLETED');
  // Any line about a node says which movement and which worker.
  for (const l of lines.filter((x) => x.node_id)) {
    assert.ok(l.movement_id && l.worker, `incomplete context: ${JSON.stringify(l)}`);
  }
});

test('FERRY_LOG_LEVEL sets the level, from the first line on', () => {
  const run = (level: string) =>
    spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', "const { log } = await import('./src/log.ts'); log.debug('d'); log.info('i'); log.warn('w');"], {
      cwd: root,
      env: { ...process.env, FERRY_LOG_LEVEL: level },
      encoding: 'utf8',
    });
  const messages = (level: string) => {
    const r = run(level);
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l).msg);
  };
  assert.deepEqual(messages('debug'), ['d', 'i', 'w']);
  assert.deepEqual(messages('warn'), ['w']);
  assert.deepEqual(messages('silent'), []);
  const line = JSON.parse(run('info').stdout.trim().split('\n')[0]);
  assert.equal(line.service, 'ferry');
  assert.equal(typeof line.time, 'string', 'ISO timestamps');
});

test('one info line per committed transition: movement, node, from, to, attempt and the provider\'s reference; none for a rolled-back one', async (t) => {
  const db = await scratchDatabase(t);
  const deps = runtimeDeps(db.pool);
  const { lines, logger } = capture();
  deps.transitions.log = logger;
  const id = await approvedMovement(deps, plan('transition-lines', [simNode('pay', {}), simNode('sweep', {})], [{ from: 'pay', to: 'sweep' }]));
  await drain(deps);
  const s = await snapshot(db.pool, id);
  assert.equal(s.movement.request_state, 'COMPLETED');

  const nodeLines = lines.filter((l) => l.msg === 'node transition');
  const logged = await db.pool.query(`SELECT entity_id, from_state, to_state FROM transitions WHERE request_id = $1 AND entity_type = 'node' ORDER BY id`, [id]);
  // Every one after the nodes' creation (written when the movement was created, not by the batch).
  const delivered = logged.rows.filter((r) => r.from_state !== '');
  assert.ok(delivered.length >= 8);
  for (const r of delivered) {
    assert.ok(
      nodeLines.some((l) => l.node_id === r.entity_id && l.from === r.from_state && l.to === r.to_state),
      `a line for ${r.from_state} -> ${r.to_state} of ${r.entity_id}: ${JSON.stringify(nodeLines)}`,
    );
  }
  for (const l of nodeLines) {
    assert.equal(l.level, 30, 'at info');
    assert.equal(l.movement_id, id);
    assert.ok(['pay', 'sweep'].includes(l.node_key));
    assert.equal(typeof l.attempt, 'number');
    assert.ok(!('event_payload' in l), 'no provider answer in the line');
  }
  const completed = nodeLines.filter((l) => l.to === 'COMPLETED');
  assert.equal(completed.length, 2);
  for (const l of completed) assert.equal(l.provider_ref, s.byKey[l.node_key].provider_ref_id, 'the provider\'s reference');
  assert.ok(lines.some((l) => l.msg === 'movement transition' && l.movement_id === id && l.to === 'COMPLETED'));

  // A transaction that rolls back after its transition leaves no line.
  const { movement: pending } = await seedMovement(db.pool, plan('transition-lines-rolled-back', [simNode('pay', {})]), { createdBy: 'requester' });
  const before = lines.length;
  await assert.rejects(
    withTransaction(db.pool, async (c) => {
      await deliverMovementEvent(c, pending.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: deps.transitions });
      throw new Error('rolled back');
    }),
    /rolled back/,
  );
  assert.equal(lines.length, before, 'nothing logged for the rolled-back approval');
  await withTransaction(db.pool, (c) =>
    deliverMovementEvent(c, pending.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: deps.transitions }),
  );
  assert.ok(lines.slice(before).some((l) => l.msg === 'movement transition' && l.movement_id === pending.id && l.to === 'APPROVED'), 'the committed one is');
});
