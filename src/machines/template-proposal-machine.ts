import { and, assign, setup } from 'xstate';

/**
 * The lifecycle of a template proposal: a changed plan template waits for a second principal's
 * approval, then for a challenge window, before it becomes the template's live version. Pure: times
 * arrive inside events, and the windows are in the context from the proposal's creation.
 *
 *   PROPOSED --APPROVE--> APPROVED --FINALIZE (challenge window over)--> FINALIZED
 *                                  --CHALLENGE (window open, a reason)--> CHALLENGED
 *   PROPOSED --EXPIRE (review window over)--> EXPIRED
 *   PROPOSED | APPROVED --WITHDRAW (the proposer)--> WITHDRAWN
 *   PROPOSED --INSTALL (system proposals only)--> FINALIZED
 *
 * Actions without an implementation are messages the proposal service turns into writes in the
 * same transaction: writeVersion (the definition becomes the template's next version).
 */

export const PROPOSAL_MACHINE_ID = 'ferry.template_proposal';
export const PROPOSAL_MACHINE_VERSION = '1';

export const proposalStates = ['PROPOSED', 'APPROVED', 'FINALIZED', 'CHALLENGED', 'EXPIRED', 'WITHDRAWN'] as const;
export type ProposalState = (typeof proposalStates)[number];
/** States in which a proposal can still change (the others are final). */
export const openProposalStates: readonly ProposalState[] = ['PROPOSED', 'APPROVED'];

export interface ProposalContext {
  proposedBy: string;
  system: boolean;
  reviewExpiresAt: string;
  challengeSeconds: number;
  approvedBy: string | null;
  approvedAt: string | null;
  challengeEndsAt: string | null;
  decidedBy: string | null;
  reason: string | null;
}

export type ProposalEvent =
  | { type: 'APPROVE'; by: string; at: string }
  | { type: 'CHALLENGE'; by: string; at: string; reason: string }
  | { type: 'FINALIZE'; at: string }
  | { type: 'EXPIRE'; at: string }
  | { type: 'WITHDRAW'; by: string; at: string }
  | { type: 'INSTALL'; at: string };

export type ProposalEventType = ProposalEvent['type'];

export function initialProposalContext(input: {
  proposedBy: string;
  system: boolean;
  reviewExpiresAt: string;
  challengeSeconds: number;
}): ProposalContext {
  return {
    proposedBy: input.proposedBy,
    system: input.system,
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
const byOf = (e: ProposalEvent) => ('by' in e ? e.by : null);
const atOf = (e: ProposalEvent) => ('at' in e ? e.at : null);

/**
 * The rules, as plain predicates: the machine's guards, and refusalOf() below, which names the
 * first rule an event breaks so the caller can say why.
 */
export const proposalRules = {
  // Four-eyes: whoever proposed a change never approves it.
  approverIsNotProposer: (c: ProposalContext, e: ProposalEvent) => e.type === 'APPROVE' && e.by !== c.proposedBy,
  // Review window: a proposal nobody approved in time is no longer actionable.
  reviewWindowOpen: (c: ProposalContext, e: ProposalEvent) => atOf(e) !== null && !reached(atOf(e)!, c.reviewExpiresAt),
  reviewWindowElapsed: (c: ProposalContext, e: ProposalEvent) => atOf(e) !== null && reached(atOf(e)!, c.reviewExpiresAt),
  // Challenge window: open strictly before its end; from its end on, the proposal may be finalized.
  challengeWindowOpen: (c: ProposalContext, e: ProposalEvent) => atOf(e) !== null && !reached(atOf(e)!, c.challengeEndsAt),
  challengeWindowElapsed: (c: ProposalContext, e: ProposalEvent) => atOf(e) !== null && reached(atOf(e)!, c.challengeEndsAt),
  challengeGivesAReason: (_c: ProposalContext, e: ProposalEvent) => e.type === 'CHALLENGE' && e.reason.trim().length > 0,
  withdrawnByProposer: (c: ProposalContext, e: ProposalEvent) => e.type === 'WITHDRAW' && e.by === c.proposedBy,
  proposedBySystem: (c: ProposalContext) => c.system,
} as const;
export type ProposalRule = keyof typeof proposalRules;

const guard =
  (rule: ProposalRule) =>
  ({ context, event }: { context: ProposalContext; event: ProposalEvent }) =>
    proposalRules[rule](context, event);

const plusSeconds = (at: string, seconds: number) => new Date(Date.parse(at) + seconds * 1000).toISOString();

export const proposalMachine = setup({
  types: {
    context: {} as ProposalContext,
    events: {} as ProposalEvent,
    input: {} as ProposalContext,
  },
  guards: {
    approverIsNotProposer: guard('approverIsNotProposer'),
    reviewWindowOpen: guard('reviewWindowOpen'),
    reviewWindowElapsed: guard('reviewWindowElapsed'),
    challengeWindowOpen: guard('challengeWindowOpen'),
    challengeWindowElapsed: guard('challengeWindowElapsed'),
    challengeGivesAReason: guard('challengeGivesAReason'),
    withdrawnByProposer: guard('withdrawnByProposer'),
    proposedBySystem: guard('proposedBySystem'),
  },
  actions: {
    recordApproval: assign({
      approvedBy: ({ event }) => byOf(event),
      approvedAt: ({ event }) => atOf(event),
      challengeEndsAt: ({ context, event }) => plusSeconds(atOf(event)!, context.challengeSeconds),
    }),
    recordDecision: assign({
      decidedBy: ({ event }) => byOf(event) ?? (event.type === 'EXPIRE' ? 'system:expiry' : 'system:finalization'),
      reason: ({ event }) => (event.type === 'CHALLENGE' ? event.reason : null),
    }),
    recordInstall: assign({ decidedBy: ({ context }) => context.proposedBy }),
    writeVersion: () => {},
  },
}).createMachine({
  id: PROPOSAL_MACHINE_ID,
  version: PROPOSAL_MACHINE_VERSION,
  context: ({ input }) => input,
  initial: 'PROPOSED',
  states: {
    PROPOSED: {
      on: {
        APPROVE: { guard: and(['approverIsNotProposer', 'reviewWindowOpen']), target: 'APPROVED', actions: 'recordApproval' },
        EXPIRE: { guard: 'reviewWindowElapsed', target: 'EXPIRED', actions: 'recordDecision' },
        WITHDRAW: { guard: 'withdrawnByProposer', target: 'WITHDRAWN', actions: 'recordDecision' },
        INSTALL: { guard: 'proposedBySystem', target: 'FINALIZED', actions: ['recordInstall', 'writeVersion'] },
      },
    },
    APPROVED: {
      on: {
        FINALIZE: { guard: 'challengeWindowElapsed', target: 'FINALIZED', actions: ['recordDecision', 'writeVersion'] },
        CHALLENGE: { guard: and(['challengeWindowOpen', 'challengeGivesAReason']), target: 'CHALLENGED', actions: 'recordDecision' },
        WITHDRAW: { guard: 'withdrawnByProposer', target: 'WITHDRAWN', actions: 'recordDecision' },
      },
    },
    FINALIZED: { type: 'final' },
    CHALLENGED: { type: 'final' },
    EXPIRED: { type: 'final' },
    WITHDRAWN: { type: 'final' },
  },
});

export type ProposalMachine = typeof proposalMachine;

/** The rules each accepted event must satisfy, per state (the guards above, by name). */
const requiredRules: Partial<Record<ProposalState, Partial<Record<ProposalEventType, ProposalRule[]>>>> = {
  PROPOSED: {
    APPROVE: ['approverIsNotProposer', 'reviewWindowOpen'],
    EXPIRE: ['reviewWindowElapsed'],
    WITHDRAW: ['withdrawnByProposer'],
    INSTALL: ['proposedBySystem'],
  },
  APPROVED: {
    FINALIZE: ['challengeWindowElapsed'],
    CHALLENGE: ['challengeWindowOpen', 'challengeGivesAReason'],
    WITHDRAW: ['withdrawnByProposer'],
  },
};

/**
 * Why the machine refuses an event: 'state' when the state does not take the event at all, else
 * the first rule it breaks; null when it would be accepted.
 */
export function refusalOf(state: ProposalState, context: ProposalContext, event: ProposalEvent): 'state' | ProposalRule | null {
  const rules = requiredRules[state]?.[event.type];
  if (!rules) return 'state';
  return rules.find((r) => !proposalRules[r](context, event)) ?? null;
}
