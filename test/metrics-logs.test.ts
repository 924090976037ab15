import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import pino from 'pino';
import { scratchDatabase } from './helpers/db.ts';
import { approvedMovement, drain, plan, runtimeDeps, simNode, snapshot } from './helpers/runtime.ts';

/** Structured logs: worker lines about a node say which request, node, worker and attempt. */

const root = fileURLToPath(new URL('..', import.meta.url));

function capture() {
  const lines: Record<string, any>[] = [];
  const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { lines, logger };
}

test('dispatcher, observer and recovery lines carry request_id, node_id, worker and attempt', async (t) => {
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
  assert.equal(s.request.request_state, 'COMPLETED', 'recovery resolved the unknown submit');

  const about = (worker: string, msg: string) => lines.filter((l) => l.worker === worker && l.msg === msg);
  const submitting = about('dispatcher', 'submitting');
  const observed = about('observer', 'observed');
  const recovered = about('recovery', 'recovered');
  assert.equal(submitting.length, 3, 'one submit per node');
  assert.equal(observed.length, 1);
  assert.equal(recovered.length, 1);
  for (const l of [...submitting, ...observed, ...recovered]) {
    assert.equal(l.request_id, id, JSON.stringify(l));
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
    assert.ok(l.request_id && l.worker, `incomplete context: ${JSON.stringify(l)}`);
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
