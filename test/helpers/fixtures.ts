import { startMovement } from '../../src/services/start-movement.ts';
import type { CallbackInput, TransitionDeps } from '../../src/durable/transition.ts';
import { withTransaction, type Pool } from '../../src/persistence/db.ts';
import { saveTemplate } from '../../src/persistence/templates.ts';
import { compilePlan } from '../../src/plan/compile.ts';
import { parseTemplateDefinition, type TemplateDefinitionInput } from '../../src/plan/template-schema.ts';

/** A one-node plan on the simulation lane, with the node kind given. */
export function singleNodeTemplate(key: string, nodeKind = 'action', actionType = 'sim_action'): TemplateDefinitionInput {
  return {
    template_key: key,
    description: 'test plan',
    nodes: [{ node_key: 'only', node_kind: nodeKind, action_type: actionType, executor_binding: 'exec.sim.action', retryable: true }],
    edges: [],
  } as TemplateDefinitionInput;
}

/** withdraw -> observe -> sweep, the shape of a CEX withdrawal followed by a deposit check. */
export function threeNodeTemplate(key: string): TemplateDefinitionInput {
  return {
    template_key: key,
    nodes: [
      { node_key: 'withdraw', node_kind: 'action', action_type: 'cex_withdrawal', executor_binding: 'exec.sim.action' },
      { node_key: 'observe_deposit', node_kind: 'observe', action_type: 'cex_deposit_status', executor_binding: 'exec.sim.observe' },
      { node_key: 'sweep', node_kind: 'action', action_type: 'sweep', executor_binding: 'exec.sim.action' },
    ],
    edges: [
      { from: 'withdraw', to: 'observe_deposit' },
      { from: 'observe_deposit', to: 'sweep' },
    ],
  } as TemplateDefinitionInput;
}

export interface SeedOptions {
  createdBy?: string;
  quorum?: number;
  expiresAt?: string | null;
  callbackUrl?: string | null;
  intent?: Record<string, unknown>;
}

export async function seedMovement(pool: Pool, template: TemplateDefinitionInput, opts: SeedOptions = {}) {
  return withTransaction(pool, async (client) => {
    const { version } = await saveTemplate(client, parseTemplateDefinition(template), 'test');
    const intent = opts.intent ?? { asset: 'USDC', amount: '100' };
    const plan = compilePlan(version, intent, {});
    return startMovement(client, {
      plan,
      intent,
      inputParams: {},
      createdBy: opts.createdBy ?? 'requester',
      quorum: opts.quorum ?? 1,
      expiresAt: opts.expiresAt === undefined ? null : opts.expiresAt,
      callbackUrl: opts.callbackUrl ?? null,
      idempotencyKey: null,
      fingerprint: null,
    });
  });
}

/** Collects callbacks in memory, for tests of the transition function alone. */
export function collectingDeps(): TransitionDeps & { seen: CallbackInput[] } {
  const seen: CallbackInput[] = [];
  return {
    seen,
    callbacks: async (_client, input) => {
      seen.push(input);
    },
  };
}
