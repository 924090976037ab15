import { startMovement } from '../../src/services/start-movement.ts';
import { deliverBatch, type TransitionDeps } from '../../src/durable/transition.ts';
import { withTransaction, type Pool } from '../../src/persistence/db.ts';
import { saveTemplate } from '../../src/persistence/templates.ts';
import { compilePlan } from '../../src/plan/compile.ts';
import { parseTemplateDefinition, type TemplateDefinitionInput } from '../../src/plan/template-schema.ts';

/**
 * Load generation for the benchmark and the throughput tests: many movements of one plan,
 * created and approved through the same functions the API uses.
 */

/** action -> observe -> action on the simulation lane, zero latency. */
export function benchTemplate(key = 'bench-3node'): TemplateDefinitionInput {
  return {
    template_key: key,
    description: 'benchmark: action -> observe -> action on the sim lane',
    nodes: [
      { node_key: 'withdraw', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
      { node_key: 'observe', node_kind: 'observe', action_type: 'sim_observe', executor_binding: 'exec.sim.observe' },
      { node_key: 'sweep', node_kind: 'action', action_type: 'sim_action', executor_binding: 'exec.sim.action' },
    ],
    edges: [
      { from: 'withdraw', to: 'observe' },
      { from: 'observe', to: 'sweep' },
    ],
  } as TemplateDefinitionInput;
}

async function inParallel<T>(count: number, concurrency: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

export async function createMovements(pool: Pool, template: TemplateDefinitionInput, count: number, concurrency = 8): Promise<string[]> {
  const version = await withTransaction(pool, async (c) => (await saveTemplate(c, parseTemplateDefinition(template), 'bench')).version);
  return inParallel(count, concurrency, async (i) => {
    const intent = { asset: 'USDC', amount: String(100 + i), destination: { address: '0x000000000000000000000000000000000000dEaD' } };
    const plan = compilePlan(version, intent, {});
    const { movement } = await withTransaction(pool, (c) =>
      startMovement(c, {
        plan,
        intent,
        inputParams: {},
        createdBy: 'bench:requester',
        quorum: 1,
        expiresAt: null,
        callbackUrl: null,
        idempotencyKey: null,
        fingerprint: null,
      }),
    );
    return movement.id;
  });
}

/**
 * Approves the movements, `perCommit` of them per transaction through the batched transition
 * function (each approval is still its own event and log row), `concurrency` transactions at once.
 */
export async function approveMovements(pool: Pool, ids: string[], deps: TransitionDeps, concurrency = 8, perCommit = 1): Promise<void> {
  const chunks: string[][] = [];
  for (let i = 0; i < ids.length; i += perCommit) chunks.push(ids.slice(i, i + perCommit));
  await inParallel(chunks.length, concurrency, async (i) => {
    const at = new Date().toISOString();
    await withTransaction(pool, async (c) => {
      const result = await deliverBatch(
        c,
        { movements: chunks[i].map((movementId) => ({ movementId, event: { type: 'APPROVE', by: 'bench:approver', at } })) },
        { actor: 'bench:approver', deps },
      );
      const refused = result.movements.find((r) => r instanceof Error);
      if (refused) throw refused;
    });
  });
}
