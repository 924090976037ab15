import { assign, setup } from 'xstate';

/**
 * The lifecycle of a standing order (docs/policy.md, "Standing orders"): an approved, bounded
 * permission for routine movements. One principal proposes it; it becomes ACTIVE once as many
 * distinct other principals as it requires have approved it (the policy's quorum for its maximum
 * per run). Pure: times arrive inside events, the expiry is in the context from its creation.
 *
 *   PROPOSED --APPROVE (not the proposer, not yet approved by them, not expired)--> PROPOSED | ACTIVE (the last one needed)
 *   PROPOSED --REJECT (a reason)--> REJECTED
 *   ACTIVE --PAUSE--> PAUSED --RESUME (not expired)--> ACTIVE
 *   PROPOSED | ACTIVE | PAUSED --REVOKE--> REVOKED
 *   PROPOSED | ACTIVE | PAUSED --EXPIRE (its expiry reached)--> EXPIRED
 *
 * Only an ACTIVE order runs; what a run may do is the standing order service's, within the bounds
 * its row holds.
 */

export const STANDING_ORDER_MACHINE_ID = 'ferry.standing_order';
export const STANDING_ORDER_MACHINE_VERSION = '1';

export const standingOrderStates = ['PROPOSED', 'ACTIVE', 'PAUSED', 'REJECTED', 'REVOKED', 'EXPIRED'] as const;
export type StandingOrderState = (typeof standingOrderStates)[number];

export interface StandingOrderContext {
  proposedBy: string;
  requiredApprovals: number;
  expiresAt: string;
  approvals: { by: string; at: string }[];
  decidedBy: string | null;
  reason: string | null;
}

export type StandingOrderEvent =
  | { type: 'APPROVE'; by: string; at: string }
  | { type: 'REJECT'; by: string; at: string; reason: string }
  | { type: 'PAUSE'; by: string; at: string; reason?: string }
  | { type: 'RESUME'; by: string; at: string }
  | { type: 'REVOKE'; by: string; at: string; reason?: string }
  | { type: 'EXPIRE'; at: string };

export type StandingOrderEventType = StandingOrderEvent['type'];

export const STANDING_ORDER_EXPIRER = 'system:standing_order_expiry';

const reached = (at: string, deadline: string) => Date.parse(at) >= Date.parse(deadline);

/** The rules as plain predicates: the guards, and standingOrderRefusalOf() below. */
export const standingOrderRules = {
  // Four-eyes: whoever proposed an order never approves it.
  approverIsNotProposer: (c: StandingOrderContext, e: StandingOrderEvent) => e.type === 'APPROVE' && e.by !== c.proposedBy,
  approverHasNotApprovedYet: (c: StandingOrderContext, e: StandingOrderEvent) => e.type === 'APPROVE' && !c.approvals.some((a) => a.by === e.by),
  notExpired: (c: StandingOrderContext, e: StandingOrderEvent) => !reached(e.at, c.expiresAt),
  expiryReached: (c: StandingOrderContext, e: StandingOrderEvent) => reached(e.at, c.expiresAt),
  givesAReason: (_c: StandingOrderContext, e: StandingOrderEvent) => e.type === 'REJECT' && e.reason.trim().length > 0,
} as const;
export type StandingOrderRule = keyof typeof standingOrderRules;

const guard =
  (rule: StandingOrderRule) =>
  ({ context, event }: { context: StandingOrderContext; event: StandingOrderEvent }) =>
    standingOrderRules[rule](context, event);

const approvable = ({ context, event }: { context: StandingOrderContext; event: StandingOrderEvent }) =>
  standingOrderRules.approverIsNotProposer(context, event) && standingOrderRules.approverHasNotApprovedYet(context, event) && standingOrderRules.notExpired(context, event);
const lastApprovalNeeded = (a: { context: StandingOrderContext; event: StandingOrderEvent }) => approvable(a) && a.context.approvals.length + 1 >= a.context.requiredApprovals;

export const standingOrderMachine = setup({
  types: {
    context: {} as StandingOrderContext,
    events: {} as StandingOrderEvent,
    input: {} as StandingOrderContext,
  },
  guards: {
    approvable,
    lastApprovalNeeded,
    notExpired: guard('notExpired'),
    expiryReached: guard('expiryReached'),
    givesAReason: guard('givesAReason'),
  },
  actions: {
    recordApproval: assign({ approvals: ({ context, event }) => [...context.approvals, { by: (event as { by: string }).by, at: event.at }] }),
    recordDecision: assign({
      decidedBy: ({ event }) => ('by' in event ? event.by : STANDING_ORDER_EXPIRER),
      reason: ({ event }) => ('reason' in event && event.reason ? event.reason : null),
    }),
  },
}).createMachine({
  id: STANDING_ORDER_MACHINE_ID,
  version: STANDING_ORDER_MACHINE_VERSION,
  context: ({ input }) => input,
  initial: 'PROPOSED',
  states: {
    PROPOSED: {
      on: {
        APPROVE: [
          { guard: 'lastApprovalNeeded', target: 'ACTIVE', actions: 'recordApproval' },
          { guard: 'approvable', target: 'PROPOSED', reenter: false, actions: 'recordApproval' },
        ],
        REJECT: { guard: 'givesAReason', target: 'REJECTED', actions: 'recordDecision' },
        REVOKE: { target: 'REVOKED', actions: 'recordDecision' },
        EXPIRE: { guard: 'expiryReached', target: 'EXPIRED', actions: 'recordDecision' },
      },
    },
    ACTIVE: {
      on: {
        PAUSE: { target: 'PAUSED', actions: 'recordDecision' },
        REVOKE: { target: 'REVOKED', actions: 'recordDecision' },
        EXPIRE: { guard: 'expiryReached', target: 'EXPIRED', actions: 'recordDecision' },
      },
    },
    PAUSED: {
      on: {
        RESUME: { guard: 'notExpired', target: 'ACTIVE', actions: 'recordDecision' },
        REVOKE: { target: 'REVOKED', actions: 'recordDecision' },
        EXPIRE: { guard: 'expiryReached', target: 'EXPIRED', actions: 'recordDecision' },
      },
    },
    REJECTED: { type: 'final' },
    REVOKED: { type: 'final' },
    EXPIRED: { type: 'final' },
  },
});

const requiredRules: Partial<Record<StandingOrderState, Partial<Record<StandingOrderEventType, StandingOrderRule[]>>>> = {
  PROPOSED: { APPROVE: ['approverIsNotProposer', 'approverHasNotApprovedYet', 'notExpired'], REJECT: ['givesAReason'], REVOKE: [], EXPIRE: ['expiryReached'] },
  ACTIVE: { PAUSE: [], REVOKE: [], EXPIRE: ['expiryReached'] },
  PAUSED: { RESUME: ['notExpired'], REVOKE: [], EXPIRE: ['expiryReached'] },
};

/** Why the machine refuses an event: 'state', the first rule it breaks, or null when it is accepted. */
export function standingOrderRefusalOf(state: StandingOrderState, context: StandingOrderContext, event: StandingOrderEvent): 'state' | StandingOrderRule | null {
  const rules = requiredRules[state]?.[event.type];
  if (!rules) return 'state';
  return rules.find((r) => !standingOrderRules[r](context, event)) ?? null;
}
