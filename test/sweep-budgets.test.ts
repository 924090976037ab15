/**
 * Every sweep has a run budget: a batch size and a maximum run time (0 = unlimited). Per sweep, a
 * budget stops a run part-way, the run says so (budget_exhausted), and the next run continues where
 * it stopped until nothing is left. Rows are backdated instead of waited for, and the run time is
 * measured on an injected clock that advances a second at each reading, so nothing sleeps.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { startBoss, stopBoss } from '../src/actors/boss.ts';
import { createCallbackQueue, sweepStrandedCallbacks } from '../src/actors/callback-delivery.ts';
import { expirePendingMovements } from '../src/sweeps/expiry.ts';
import { reconcileBatch } from '../src/sweeps/reconciliation.ts';
import { sweepDefinitions } from '../src/sweeps/sweeps.ts';
import {
  approveProposal,
  expireDueProposals,
  finalizeDueProposals,
  proposeTemplate,
  type ProposalDeps,
} from '../src/services/template-proposals.ts';
import { enqueueCallback } from '../src/callbacks/outbox.ts';
import { loadConfig, type FerryConfig } from '../src/config.ts';
import { registry } from '../src/metrics.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { parseTemplateDefinition } from '../src/plan/template-schema.ts';
import { testDatabase } from './helpers/db.ts';
import { collectingDeps, seedMovement, singleNodeTemplate } from './helpers/fixtures.ts';

let boss: Awaited<ReturnType<typeof startBoss>> | undefined;
after(async () => {
  if (boss) await stopBoss(boss, { timeoutMs: 5_000 });
});
const db = await testDatabase();
const base = loadConfig({ FERRY_DATA_DIR: '.ferry/test-sweep-budgets', FERRY_LOG_LEVEL: 'silent' });
const cfg = (over: Partial<FerryConfig>): FerryConfig => ({ ...base, ...over });

/** A clock that moves one second forward each time it is read. */
function steppingClock(startMs = Date.now()) {
  let t = startMs - 1000;
  return () => (t += 1000);
}

/** Runs until a run is not stopped by its budget; the items of each run. */
async function runsUntilDone(run: () => Promise<{ items: number; exhausted: boolean }>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < 20; i++) {
    const r = await run();
    out.push(r.items);
    if (!r.exhausted) return out;
  }
  throw new Error('the sweep never finished');
}

test('every sweep names a batch size and a run time budget, and reports both', () => {
  for (const name of ['expiration_checker', 'template_proposal_expiration', 'template_finalization', 'reconciliation', 'callback_stranded_sweep']) {
    const def = sweepDefinitions.find((d) => d.name === name);
    assert.ok(def, name);
    assert.ok(def.variables.batchSize, `${name}: a batch size variable`);
    assert.ok(def.variables.budget, `${name}: a run time variable`);
    const s = def.settings(base);
    assert.ok((s.batchSize ?? 0) > 0, `${name}: batch size`);
    assert.ok(s.maxRunMs > 0, `${name}: a run time budget by default`);
  }
});

describe('approval expiry (expiration_checker)', () => {
  const overdue = async (n: number, key: string) => {
    for (let i = 0; i < n; i++) {
      await seedMovement(db.pool, singleNodeTemplate(`${key}-${i}`), { expiresAt: new Date(Date.now() - 60_000).toISOString() });
    }
  };
  const deps = (over: Partial<FerryConfig>) => ({ pool: db.pool, config: cfg(over), transitions: collectingDeps() });

  test('the batch size stops a run; the next run continues', async () => {
    await overdue(5, 'exp-batch');
    const runs = await runsUntilDone(async () => {
      const r = await expirePendingMovements(deps({ expirationBatchSize: 2, expirationMaxRunMs: 0 }));
      return { items: r.expired, exhausted: r.budgetExhausted };
    });
    assert.deepEqual(runs, [2, 2, 1]);
  });

  test('the run time stops a run part-way (injected clock); the next run continues', async () => {
    await overdue(4, 'exp-time');
    const first = await expirePendingMovements(deps({ expirationBatchSize: 50, expirationMaxRunMs: 2500 }), { now: steppingClock() });
    assert.equal(first.budgetExhausted, true);
    assert.ok(first.expired >= 1 && first.expired < 4, `part-way: ${first.expired}`);
    const rest = await expirePendingMovements(deps({ expirationBatchSize: 50, expirationMaxRunMs: 0 }));
    assert.equal(first.expired + rest.expired, 4);
    assert.equal(rest.budgetExhausted, false);
  });
});

describe('reconciliation', () => {
  const deps = (over: Partial<FerryConfig>) => ({ pool: db.pool, config: cfg(over) });

  test('the batch size stops a run; the next run continues', async () => {
    await reconcileBatch(deps({ reconciliationBatchSize: 1000, reconciliationMaxRunMs: 0 }));
    for (let i = 0; i < 5; i++) await seedMovement(db.pool, singleNodeTemplate(`rec-batch-${i}`));
    const runs = await runsUntilDone(async () => {
      const r = await reconcileBatch(deps({ reconciliationBatchSize: 2, reconciliationMaxRunMs: 0 }));
      return { items: r.checked, exhausted: r.budgetExhausted };
    });
    assert.deepEqual(runs, [2, 2, 1]);
  });

  test('the run time stops a run part-way (injected clock); the next run continues', async () => {
    for (let i = 0; i < 4; i++) await seedMovement(db.pool, singleNodeTemplate(`rec-time-${i}`));
    const first = await reconcileBatch(deps({ reconciliationBatchSize: 50, reconciliationMaxRunMs: 2500 }), { now: steppingClock(), chunkSize: 1 });
    assert.equal(first.budgetExhausted, true);
    assert.ok(first.checked >= 1 && first.checked < 4, `part-way: ${first.checked}`);
    const rest = await reconcileBatch(deps({ reconciliationBatchSize: 50, reconciliationMaxRunMs: 0 }));
    assert.equal(first.checked + rest.checked, 4);
  });
});

describe('stranded callbacks (callback_stranded_sweep)', async () => {
  boss = await startBoss(db.url, { max: 2, supervise: false, schedule: false });
  const queue = createCallbackQueue(boss);
  const stranded = async (n: number, key: string) => {
    for (let i = 0; i < n; i++) {
      const { movement } = await seedMovement(db.pool, singleNodeTemplate(`${key}-${i}`), { callbackUrl: 'http://127.0.0.1:9/never' });
      const id = await withTransaction(db.pool, (c) =>
        enqueueCallback(c, { movement: movement as never, eventType: 'request_failed', occurredAt: new Date().toISOString(), maxAttempts: 5 }),
      );
      await db.pool.query(`UPDATE callback_outbox SET next_attempt_at = now() - interval '10 minutes' WHERE id = $1`, [id]);
    }
  };

  test('the batch size stops a run; the next run continues with the rows it did not reach', async () => {
    await stranded(5, 'cb-batch');
    const runs = await runsUntilDone(async () => {
      const r = await sweepStrandedCallbacks(db.pool, queue, { limit: 2, maxRunMs: 0 });
      return { items: r.written, exhausted: r.budgetExhausted };
    });
    assert.deepEqual(runs, [2, 2, 1]);
  });

  test('the run time stops a run part-way (injected clock); the next run continues', async () => {
    await stranded(4, 'cb-time');
    const first = await sweepStrandedCallbacks(db.pool, queue, { limit: 50, maxRunMs: 2500, now: steppingClock() });
    assert.equal(first.budgetExhausted, true);
    assert.ok(first.written >= 1 && first.written < 4, `part-way: ${first.written}`);
    const rest = await sweepStrandedCallbacks(db.pool, queue, { limit: 50, maxRunMs: 0 });
    assert.equal(first.written + rest.written, 4);
    assert.equal(rest.budgetExhausted, false);
  });
});

describe('template proposals (template_proposal_expiration, template_finalization)', () => {
  const T0 = Date.parse('2035-01-01T00:00:00Z');
  const pdeps = (now: () => number): ProposalDeps => ({ pool: db.pool, config: base, now: () => new Date(now()) });
  const def = (key: string) =>
    parseTemplateDefinition({
      template_key: key,
      nodes: [{ node_key: 'pay', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' }],
      edges: [],
    });
  const REVIEW = base.templateReviewWindowSeconds * 1000;
  const CHALLENGE = base.templateChallengeWindowSeconds * 1000;

  test('expiration: the batch size, then the run time, stop a run; the next run continues', async () => {
    for (let i = 0; i < 5; i++) await proposeTemplate(pdeps(() => T0), def(`bud-exp-${i}`), 'token:proposer');
    const due = () => T0 + REVIEW;
    const runs = await runsUntilDone(async () => {
      const r = await expireDueProposals(pdeps(due), { batchSize: 2, maxRunMs: 0 });
      return { items: r.done, exhausted: r.budgetExhausted };
    });
    assert.deepEqual(runs, [2, 2, 1]);

    for (let i = 0; i < 4; i++) await proposeTemplate(pdeps(() => T0), def(`bud-exp-t-${i}`), 'token:proposer');
    const first = await expireDueProposals(pdeps(steppingClock(T0 + REVIEW)), { batchSize: 50, maxRunMs: 2500 });
    assert.equal(first.budgetExhausted, true);
    assert.ok(first.done >= 1 && first.done < 4, `part-way: ${first.done}`);
    const rest = await expireDueProposals(pdeps(due), { batchSize: 50, maxRunMs: 0 });
    assert.equal(first.done + rest.done, 4);
  });

  test('finalization: the batch size, then the run time, stop a run; the next run continues', async () => {
    const approved = async (key: string) => {
      const r = await proposeTemplate(pdeps(() => T0), def(key), 'token:proposer');
      await approveProposal(pdeps(() => T0 + 1000), (r as any).proposal.id, 'token:approver');
    };
    for (let i = 0; i < 5; i++) await approved(`bud-fin-${i}`);
    const due = () => T0 + 1000 + CHALLENGE;
    const runs = await runsUntilDone(async () => {
      const r = await finalizeDueProposals(pdeps(due), { batchSize: 2, maxRunMs: 0 });
      return { items: r.done, exhausted: r.budgetExhausted };
    });
    assert.deepEqual(runs, [2, 2, 1]);

    for (let i = 0; i < 4; i++) await approved(`bud-fin-t-${i}`);
    const first = await finalizeDueProposals(pdeps(steppingClock(T0 + 1000 + CHALLENGE)), { batchSize: 50, maxRunMs: 2500 });
    assert.equal(first.budgetExhausted, true);
    assert.ok(first.done >= 1 && first.done < 4, `part-way: ${first.done}`);
    const rest = await finalizeDueProposals(pdeps(due), { batchSize: 50, maxRunMs: 0 });
    assert.equal(first.done + rest.done, 4);
    const metrics = await registry.getSingleMetricAsString('ferry_template_proposal_sweep_total');
    assert.match(metrics, /sweep="template_finalization",result="finalized"} 9/);
  });
});
