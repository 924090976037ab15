import { and, assign, setup } from 'xstate';

/**
 * The lifecycle of a credential proposal: a change of who may act (a new principal, a token for
 * someone else, a token of a role that approves or administers) proposed by one admin waits for a
 * second principal to confirm it. Pure: times arrive inside events, the review window is in the
 * context from the proposal's creation.
 *
 *   PROPOSED --CONFIRM (not the proposer, window open)--> CONFIRMED   (applyChange)
 *   PROPOSED --REJECT (anyone, the proposer included)--> REJECTED
 *   PROPOSED --EXPIRE (review window over)--> EXPIRED
 *
 * `applyChange` is a message: the credential proposal service creates the principal or the token
 * in the same transaction as the transition.
 */

export const CREDENTIAL_MACHINE_ID = 'ferry.credential_proposal';
export const CREDENTIAL_MACHINE_VERSION = '1';

export const credentialProposalStates = ['PROPOSED', 'CONFIRMED', 'REJECTED', 'EXPIRED'] as const;
export type CredentialProposalState = (typeof credentialProposalStates)[number];

export interface CredentialProposalContext {
  proposedBy: string;
  reviewExpiresAt: string;
  decidedBy: string | null;
  decidedAt: string | null;
  reason: string | null;
}

export type CredentialProposalEvent =
  | { type: 'CONFIRM'; by: string; at: string }
  | { type: 'REJECT'; by: string; at: string; reason: string | null }
  | { type: 'EXPIRE'; at: string };

export type CredentialProposalEventType = CredentialProposalEvent['type'];

export function initialCredentialProposalContext(input: { proposedBy: string; reviewExpiresAt: string }): CredentialProposalContext {
  return { proposedBy: input.proposedBy, reviewExpiresAt: input.reviewExpiresAt, decidedBy: null, decidedAt: null, reason: null };
}

const reached = (at: string, deadline: string) => Date.parse(at) >= Date.parse(deadline);

/** The rules as plain predicates: the guards, and refusalOf() below, which names the one an event breaks. */
export const credentialProposalRules = {
  // Two people: whoever proposed a change of credentials never confirms it.
  confirmerIsNotProposer: (c: CredentialProposalContext, e: CredentialProposalEvent) => e.type === 'CONFIRM' && e.by !== c.proposedBy,
  reviewWindowOpen: (c: CredentialProposalContext, e: CredentialProposalEvent) => !reached(e.at, c.reviewExpiresAt),
  reviewWindowElapsed: (c: CredentialProposalContext, e: CredentialProposalEvent) => reached(e.at, c.reviewExpiresAt),
} as const;
export type CredentialProposalRule = keyof typeof credentialProposalRules;

const guard =
  (rule: CredentialProposalRule) =>
  ({ context, event }: { context: CredentialProposalContext; event: CredentialProposalEvent }) =>
    credentialProposalRules[rule](context, event);

export const credentialProposalMachine = setup({
  types: {
    context: {} as CredentialProposalContext,
    events: {} as CredentialProposalEvent,
    input: {} as CredentialProposalContext,
  },
  guards: {
    confirmerIsNotProposer: guard('confirmerIsNotProposer'),
    reviewWindowOpen: guard('reviewWindowOpen'),
    reviewWindowElapsed: guard('reviewWindowElapsed'),
  },
  actions: {
    recordDecision: assign({
      decidedBy: ({ event }) => ('by' in event ? event.by : 'system:expiry'),
      decidedAt: ({ event }) => event.at,
      reason: ({ event }) => (event.type === 'REJECT' ? event.reason : null),
    }),
    applyChange: () => {},
  },
}).createMachine({
  id: CREDENTIAL_MACHINE_ID,
  version: CREDENTIAL_MACHINE_VERSION,
  context: ({ input }) => input,
  initial: 'PROPOSED',
  states: {
    PROPOSED: {
      on: {
        CONFIRM: { guard: and(['confirmerIsNotProposer', 'reviewWindowOpen']), target: 'CONFIRMED', actions: ['recordDecision', 'applyChange'] },
        REJECT: { target: 'REJECTED', actions: 'recordDecision' },
        EXPIRE: { guard: 'reviewWindowElapsed', target: 'EXPIRED', actions: 'recordDecision' },
      },
    },
    CONFIRMED: { type: 'final' },
    REJECTED: { type: 'final' },
    EXPIRED: { type: 'final' },
  },
});

const requiredRules: Partial<Record<CredentialProposalState, Partial<Record<CredentialProposalEventType, CredentialProposalRule[]>>>> = {
  PROPOSED: { CONFIRM: ['confirmerIsNotProposer', 'reviewWindowOpen'], REJECT: [], EXPIRE: ['reviewWindowElapsed'] },
};

/** Why the machine refuses an event: 'state', the first rule it breaks, or null when it is accepted. */
export function credentialRefusalOf(
  state: CredentialProposalState,
  context: CredentialProposalContext,
  event: CredentialProposalEvent,
): 'state' | CredentialProposalRule | null {
  const rules = requiredRules[state]?.[event.type];
  if (!rules) return 'state';
  return rules.find((r) => !credentialProposalRules[r](context, event)) ?? null;
}
