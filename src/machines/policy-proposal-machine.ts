import { and, assign, setup } from 'xstate';

/**
 * The lifecycle of a policy proposal: a change of the address book (an entry added, changed or
 * removed) or of the rule set (a new version), proposed by one principal, approved by another, and
 * live only after a cool-down in which anyone may challenge it. Pure: times arrive inside events,
 * and the windows are in the context from the proposal's creation.
 *
 *   PROPOSED --APPROVE (not the proposer, review window open)--> APPROVED
 *   APPROVED --FINALIZE (cool-down over)--> FINALIZED                    (applyChange)
 *   APPROVED --CHALLENGE (cool-down open, a reason)--> CHALLENGED
 *   PROPOSED --REJECT (a reason)--> REJECTED
 *   PROPOSED --EXPIRE (review window over)--> EXPIRED
 *   PROPOSED | APPROVED --WITHDRAW (the proposer)--> WITHDRAWN
 *
 * `applyChange` is a message: the policy service writes the book entry or the rule set version in
 * the same transaction as the transition.
 */

export const POLICY_PROPOSAL_MACHINE_ID = 'ferry.policy_proposal';
export const POLICY_PROPOSAL_MACHINE_VERSION = '1';

export const policyProposalStates = ['PROPOSED', 'APPROVED', 'FINALIZED', 'CHALLENGED', 'REJECTED', 'EXPIRED', 'WITHDRAWN'] as const;
export type PolicyProposalState = (typeof policyProposalStates)[number];
export const openPolicyProposalStates: readonly PolicyProposalState[] = ['PROPOSED', 'APPROVED'];

export interface PolicyProposalContext {
  proposedBy: string;
  reviewExpiresAt: string;
  /** The cool-down after approval, in seconds: the challenge window. */
  challengeSeconds: number;
  approvedBy: string | null;
  approvedAt: string | null;
  challengeEndsAt: string | null;
  decidedBy: string | null;
  reason: string | null;
}

export type PolicyProposalEvent =
  | { type: 'APPROVE'; by: string; at: string }
  | { type: 'CHALLENGE'; by: string; at: string; reason: string }
  | { type: 'REJECT'; by: string; at: string; reason: string }
  | { type: 'FINALIZE'; at: string }
  | { type: 'EXPIRE'; at: string }
  | { type: 'WITHDRAW'; by: string; at: string };

export type PolicyProposalEventType = PolicyProposalEvent['type'];

export const POLICY_FINALIZER = 'system:policy_finalization';
export const POLICY_EXPIRER = 'system:policy_expiry';

export function initialPolicyProposalContext(input: { proposedBy: string; reviewExpiresAt: string; challengeSeconds: number }): PolicyProposalContext {
  return {
    proposedBy: input.proposedBy,
    reviewExpiresAt: input.reviewExpiresAt,
    challengeSeconds: input.challengeSeconds,
    approvedBy: null,
    approvedAt: null,
    challengeEndsAt: null,
    decidedBy: null,
    reason: null,
  };
}

const reached = (at: string, deadline: string | null) => deadline !== null && Date.parse(at) >= Date.parse(deadline);
const plusSeconds = (at: string, seconds: number) => new Date(Date.parse(at) + seconds * 1000).toISOString();
const byOf = (e: PolicyProposalEvent) => ('by' in e ? e.by : null);

/** The rules as plain predicates: the guards, and policyRefusalOf() below, which names the one an event breaks. */
export const policyProposalRules = {
  // Four-eyes: whoever proposed a policy change never approves it.
  approverIsNotProposer: (c: PolicyProposalContext, e: PolicyProposalEvent) => e.type === 'APPROVE' && e.by !== c.proposedBy,
  reviewWindowOpen: (c: PolicyProposalContext, e: PolicyProposalEvent) => !reached(e.at, c.reviewExpiresAt),
  reviewWindowElapsed: (c: PolicyProposalContext, e: PolicyProposalEvent) => reached(e.at, c.reviewExpiresAt),
  // The cool-down: open strictly before its end; from its end on, the change may go live.
  challengeWindowOpen: (c: PolicyProposalContext, e: PolicyProposalEvent) => !reached(e.at, c.challengeEndsAt),
  challengeWindowElapsed: (c: PolicyProposalContext, e: PolicyProposalEvent) => reached(e.at, c.challengeEndsAt),
  givesAReason: (_c: PolicyProposalContext, e: PolicyProposalEvent) => (e.type === 'CHALLENGE' || e.type === 'REJECT') && e.reason.trim().length > 0,
  withdrawnByProposer: (c: PolicyProposalContext, e: PolicyProposalEvent) => e.type === 'WITHDRAW' && e.by === c.proposedBy,
} as const;
export type PolicyProposalRule = keyof typeof policyProposalRules;

const guard =
  (rule: PolicyProposalRule) =>
  ({ context, event }: { context: PolicyProposalContext; event: PolicyProposalEvent }) =>
    policyProposalRules[rule](context, event);

export const policyProposalMachine = setup({
  types: {
    context: {} as PolicyProposalContext,
    events: {} as PolicyProposalEvent,
    input: {} as PolicyProposalContext,
  },
  guards: {
    approverIsNotProposer: guard('approverIsNotProposer'),
    reviewWindowOpen: guard('reviewWindowOpen'),
    reviewWindowElapsed: guard('reviewWindowElapsed'),
    challengeWindowOpen: guard('challengeWindowOpen'),
    challengeWindowElapsed: guard('challengeWindowElapsed'),
    givesAReason: guard('givesAReason'),
    withdrawnByProposer: guard('withdrawnByProposer'),
  },
  actions: {
    recordApproval: assign({
      approvedBy: ({ event }) => byOf(event),
      approvedAt: ({ event }) => event.at,
      challengeEndsAt: ({ context, event }) => plusSeconds(event.at, context.challengeSeconds),
    }),
    recordDecision: assign({
      decidedBy: ({ event }) => byOf(event) ?? (event.type === 'EXPIRE' ? POLICY_EXPIRER : POLICY_FINALIZER),
      reason: ({ event }) => (event.type === 'CHALLENGE' || event.type === 'REJECT' ? event.reason : null),
    }),
    applyChange: () => {},
  },
}).createMachine({
  id: POLICY_PROPOSAL_MACHINE_ID,
  version: POLICY_PROPOSAL_MACHINE_VERSION,
  context: ({ input }) => input,
  initial: 'PROPOSED',
  states: {
    PROPOSED: {
      on: {
        APPROVE: { guard: and(['approverIsNotProposer', 'reviewWindowOpen']), target: 'APPROVED', actions: 'recordApproval' },
        REJECT: { guard: 'givesAReason', target: 'REJECTED', actions: 'recordDecision' },
        EXPIRE: { guard: 'reviewWindowElapsed', target: 'EXPIRED', actions: 'recordDecision' },
        WITHDRAW: { guard: 'withdrawnByProposer', target: 'WITHDRAWN', actions: 'recordDecision' },
      },
    },
    APPROVED: {
      on: {
        FINALIZE: { guard: 'challengeWindowElapsed', target: 'FINALIZED', actions: ['recordDecision', 'applyChange'] },
        CHALLENGE: { guard: and(['challengeWindowOpen', 'givesAReason']), target: 'CHALLENGED', actions: 'recordDecision' },
        WITHDRAW: { guard: 'withdrawnByProposer', target: 'WITHDRAWN', actions: 'recordDecision' },
      },
    },
    FINALIZED: { type: 'final' },
    CHALLENGED: { type: 'final' },
    REJECTED: { type: 'final' },
    EXPIRED: { type: 'final' },
    WITHDRAWN: { type: 'final' },
  },
});

const requiredRules: Partial<Record<PolicyProposalState, Partial<Record<PolicyProposalEventType, PolicyProposalRule[]>>>> = {
  PROPOSED: {
    APPROVE: ['approverIsNotProposer', 'reviewWindowOpen'],
    REJECT: ['givesAReason'],
    EXPIRE: ['reviewWindowElapsed'],
    WITHDRAW: ['withdrawnByProposer'],
  },
  APPROVED: {
    FINALIZE: ['challengeWindowElapsed'],
    CHALLENGE: ['challengeWindowOpen', 'givesAReason'],
    WITHDRAW: ['withdrawnByProposer'],
  },
};

/** Why the machine refuses an event: 'state', the first rule it breaks, or null when it is accepted. */
export function policyRefusalOf(
  state: PolicyProposalState,
  context: PolicyProposalContext,
  event: PolicyProposalEvent,
): 'state' | PolicyProposalRule | null {
  const rules = requiredRules[state]?.[event.type];
  if (!rules) return 'state';
  return rules.find((r) => !policyProposalRules[r](context, event)) ?? null;
}
