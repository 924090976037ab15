import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { EventObject } from 'xstate';
import {
  deliverNodeEvent,
  deliverMovementEvent,
  nodeContextFromRow,
  movementContextFromRow,
} from '../src/durable/transition.ts';
import { definedTransitions, transitionKey } from '../src/machines/introspect.ts';
import { CANCEL_REF, initialNodeContext, isCancelRecord, nodeMachine, type NodeEvent } from '../src/machines/node-machine.ts';
import type { NodeSummary } from '../src/machines/node-summary.ts';
import { initialMovementContext, movementMachine, type MovementEvent } from '../src/machines/movement-machine.ts';
import {
  approveProposal,
  challengeProposal,
  expireProposal,
  finalizeProposal,
  installSystemTemplate,
  proposalContextFromRow,
  proposeTemplate,
  replayProposal,
  withdrawProposal,
} from '../src/services/template-proposals.ts';
import {
  initialProposalContext,
  proposalMachine,
  proposalRules,
  refusalOf,
  type ProposalEvent,
} from '../src/machines/template-proposal-machine.ts';
import { getProposal, proposalTransitions } from '../src/persistence/template-proposals.ts';
import {
  confirmCredentialProposal,
  credentialContextFromRow,
  expireCredentialProposal,
  proposePrincipal,
  rejectCredentialProposal,
  replayCredentialProposal,
} from '../src/services/credential-proposals.ts';
import {
  credentialProposalMachine,
  credentialProposalRules,
  credentialRefusalOf,
  initialCredentialProposalContext,
  type CredentialProposalEvent,
} from '../src/machines/credential-proposal-machine.ts';
import { credentialProposalTransitions, getCredentialProposal } from '../src/persistence/credential-proposals.ts';
import {
  approvePolicyProposal,
  challengePolicyProposal,
  expirePolicyProposal,
  finalizePolicyProposal,
  policyContextFromRow,
  proposeRuleSet,
  rejectPolicyProposal,
  replayPolicyProposal,
  withdrawPolicyProposal,
} from '../src/services/policy.ts';
import {
  initialPolicyProposalContext,
  policyProposalMachine,
  policyProposalRules,
  policyRefusalOf,
  type PolicyProposalEvent,
} from '../src/machines/policy-proposal-machine.ts';
import { getPolicyProposal, policyProposalTransitions } from '../src/persistence/policy.ts';
import { callbackContextFromRow, recordAttemptOutcome, recordStrandedRequeues, redriveCallback } from '../src/callbacks/lifecycle.ts';
import { callbackMachine, initialCallbackContext, type CallbackEvent } from '../src/machines/callback-delivery-machine.ts';
import { claimCallback, getCallback, insertCallback } from '../src/persistence/callbacks.ts';
import { parseTemplateDefinition } from '../src/plan/template-schema.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { getNode, getMovement, transitionsOfEntity } from '../src/persistence/movements.ts';
import { testDatabase } from './helpers/db.ts';
import { collectingDeps, seedMovement, singleNodeTemplate } from './helpers/fixtures.ts';
import { coveringPaths, walkedTransitions, type ModelPath } from './helpers/model-paths.ts';

/**
 * Model-based tests: paths generated from the machines are replayed against the real durable
 * transition function on real Postgres. After every step the stored row must equal the machine's
 * snapshot (state and context), and the transition log must be gap-free and end in that state.
 */

const db = await testDatabase();
const deps = collectingDeps();

// Times in the canonical form Postgres timestamps round-trip to.
const T1 = '2029-06-01T10:00:00.000Z';
const T2 = '2029-06-01T10:00:05.000Z';
const EXPIRES = '2030-01-01T00:00:00.000Z';
const AFTER_EXPIRY = '2030-01-01T00:00:01.000Z';

const outcomes = ['COMPLETED', 'SUBMITTED', 'OBSERVING', 'FAILED', 'UNKNOWN'] as const;
// Evidence and resolutions name the attempt they are about: the one the snapshot is at.
const resolution = (attemptNo: number, proposedBy: string, confirmedBy: string) => ({
  resolutionId: '7c9e6679-7425-40de-944b-e07fc1f90ae7',
  attemptNo,
  proposedBy,
  confirmedBy,
  reason: 'provider statement checked',
  at: T2,
});
const nodeEvents = (s?: { context: { attemptNo: number } }): NodeEvent[] => [
  { type: 'UNBLOCKED' },
  { type: 'DISPATCH_CLAIMED', at: T1 },
  { type: 'PREFLIGHT_FAILED', errorCode: 'ADDRESS_NOT_WHITELISTED', errorDetail: 'not on the whitelist' },
  { type: 'PREFLIGHT_SKIPPED', errorCode: 'NOTHING_TO_DO' },
  { type: 'PREPARE_FAILED', errorCode: 'PREPARE_RETURNED_NO_ACTION' },
  { type: 'DISPATCH_DEFERRED', errorCode: 'TEMPORARY', retryAt: T2 },
  { type: 'PREPARED', signingRequired: true, at: T1 },
  { type: 'PREPARED', signingRequired: false, at: T1 },
  { type: 'SIGNED', at: T1 },
  { type: 'SIGNING_FAILED', errorCode: 'SIGNER_PAYLOAD_HASH_MISMATCH' },
  { type: 'PRE_SUBMIT_CHECK_DEFERRED', errorCode: 'PRE_SUBMIT_CHECK_TEMPORARY_ERROR', retryAt: T2 },
  { type: 'PRE_SUBMIT_CHECK_FAILED', errorCode: 'PRE_SUBMIT_CHECK_FATAL_ERROR' },
  ...outcomes.map((s) => ({
    type: 'SUBMIT_RESULT' as const,
    outcome: { nextState: s, providerState: `p_${s}`, providerRefs: { txid: `0x${s}` }, providerRefId: `ref_${s}` },
    at: T1,
    nextObserveAt: s === 'SUBMITTED' || s === 'OBSERVING' ? T2 : null,
  })),
  ...outcomes.map((s) => ({
    type: 'OBSERVED' as const,
    outcome: { nextState: s, providerState: `o_${s}`, providerRefs: { seen: s } },
    at: T2,
    nextObserveAt: s === 'OBSERVING' || s === 'SUBMITTED' ? T2 : null,
  })),
  { type: 'OBSERVATION_TIMED_OUT', at: T2 },
  { type: 'REPLACEMENT_SIGNED', attemptNo: 1, payloadHash: 'sha256:v2', at: T2 },
  ...[...outcomes, 'READY' as const].map((s) => ({
    type: 'RECOVERED' as const,
    outcome: { nextState: s, providerState: `r_${s}`, errorCode: s === 'FAILED' ? 'RECOVERY_FAILED' : null },
    at: T2,
    nextObserveAt: s === 'SUBMITTED' || s === 'OBSERVING' ? T2 : null,
  })),
  {
    type: 'RECOVERED',
    outcome: { nextState: 'UNKNOWN', providerState: 'r_manual', errorCode: 'CEX_NO_PREPARED_ACTION', manualInterventionRequired: true },
    at: T2,
    nextObserveAt: null,
  },
  ...(['COMPLETED', 'FAILED'] as const).map((state) => ({
    type: 'RECONCILED' as const,
    outcome: { nextState: state, providerState: `rc_${state}`, providerRefs: { evidence: state } },
    attemptNo: s?.context.attemptNo ?? 0,
    driftClass: state === 'COMPLETED' ? 'failed_but_provider_completed' : 'unknown_but_provider_knows',
    at: T2,
    nextObserveAt: null,
  })),
  { type: 'RESOLVED_COMPLETED', providerRef: 'stmt-42', ...resolution(s?.context.attemptNo ?? 0, 'operator-a', 'operator-b') },
  { type: 'RESOLVED_FAILED', ...resolution(s?.context.attemptNo ?? 0, 'operator-a', 'operator-b') },
  { type: 'RESOLVED_RETRY', ...resolution(s?.context.attemptNo ?? 0, 'operator-a', 'operator-b') },
  // Refused: the proposer confirming their own resolution.
  { type: 'RESOLVED_RETRY', ...resolution(s?.context.attemptNo ?? 0, 'operator-a', 'operator-a') },
  { type: 'RETRY_REQUESTED' },
  { type: 'MANUAL_CONFIRMED', at: T2 },
  { type: 'SKIP_REQUESTED' },
  { type: 'CANCEL_REQUESTED' },
  // An operator's cancel as the lane answers it: confirmed, or pending (the node stays observed).
  ...(['CANCELLED', 'SUBMITTED'] as const).map((state) => ({
    type: 'CANCEL_ANSWERED' as const,
    outcome: { nextState: state, providerState: `c_${state}`, providerRefs: { cancel_tx_hash: '0xc' } },
    attemptNo: s?.context.attemptNo ?? 0,
    by: 'principal:operator',
    at: T2,
  })),
  // The provider confirms the cancel later: an observation, or recovery of a node gone UNKNOWN.
  { type: 'OBSERVED', outcome: { nextState: 'CANCELLED', providerState: 'cancel_mined' }, at: T2, nextObserveAt: null },
  { type: 'RECOVERED', outcome: { nextState: 'CANCELLED', providerState: 'cancel_mined' }, at: T2, nextObserveAt: null },
];

const summary = (over: Partial<NodeSummary>): NodeSummary => ({
  total: 2,
  done: 0,
  failed: 0,
  unknown: 0,
  sideEffectCompleted: false,
  manualGateReady: false,
  executing: false,
  inFlight: false,
  ...over,
});
const requestEvents = (): MovementEvent[] => [
  { type: 'APPROVE', by: 'approver-a', at: T1 },
  { type: 'APPROVE', by: 'approver-b', at: T1 },
  { type: 'APPROVE', by: 'requester', at: T1 },
  { type: 'APPROVE', by: 'approver-c', at: AFTER_EXPIRY },
  { type: 'REJECT', by: 'approver-a', at: T1 },
  { type: 'EXPIRE', at: T1 },
  { type: 'EXPIRE', at: AFTER_EXPIRY },
  { type: 'DISPATCH_STARTED' },
  { type: 'NODES_SETTLED', summary: summary({ done: 2 }) },
  { type: 'NODES_SETTLED', summary: summary({ done: 1, failed: 1, sideEffectCompleted: true }) },
  { type: 'NODES_SETTLED', summary: summary({ unknown: 1, sideEffectCompleted: true, inFlight: true }) },
  { type: 'NODES_SETTLED', summary: summary({ failed: 1 }) },
  { type: 'NODES_SETTLED', summary: summary({ done: 1, manualGateReady: true }) },
  { type: 'NODES_SETTLED', summary: summary({ done: 1, executing: true }) },
  { type: 'NODES_SETTLED', summary: summary({ unknown: 1, inFlight: true, manualIntervention: true }) },
  { type: 'NODES_SETTLED', summary: summary({ cancelled: 1 }) },
  { type: 'RESUME', by: 'operator' },
  { type: 'NODE_RETRIED', by: 'operator', nodeKey: 'only' },
  { type: 'CANCEL', by: 'operator', summary: summary({}) },
  { type: 'CANCEL', by: 'operator', summary: summary({ inFlight: true, executing: true }) },
];

const nodeInputs = [
  { name: 'automatic node', kind: 'action', actionType: 'sim_action' },
  { name: 'manual gate', kind: 'manual_gate', actionType: 'manual_approval' },
];
const requestInputs = [1, 2];

const nodePaths = new Map<string, ModelPath[]>();
for (const input of nodeInputs) {
  nodePaths.set(
    input.name,
    coveringPaths(nodeMachine, {
      input: initialNodeContext({ nodeKind: input.kind, actionType: input.actionType, retryable: true }),
      events: nodeEvents as (s: unknown) => EventObject[],
      // Whether an operator's cancel was asked of the attempt is part of the state: it decides
      // whether the provider's CANCELLED settles the node.
      serializeState: (s) => `${s.value}${isCancelRecord(s.context.providerRefs[CANCEL_REF]) ? '+cancel' : ''}`,
    }),
  );
}
const movementPaths = new Map<number, ModelPath[]>();
for (const quorum of requestInputs) {
  movementPaths.set(
    quorum,
    coveringPaths(movementMachine, {
      input: initialMovementContext({ createdBy: 'requester', quorum, expiresAt: EXPIRES }),
      events: requestEvents as (s: unknown) => EventObject[],
      serializeState: (s) => `${s.value}/${s.context.approvals.length}`,
    }),
  );
}

async function assertLogMatches(entityId: string, state: string) {
  const log = await transitionsOfEntity(db.pool, entityId);
  assert.deepEqual(
    log.map((t) => t.seq),
    log.map((_, i) => i),
    'transition log has no gap or duplicate',
  );
  assert.equal(log.at(-1)!.to_state, state, 'stored state equals the last logged to_state');
}

let counter = 0;
for (const input of nodeInputs) {
  describe(`node machine, ${input.name}: generated paths`, () => {
    for (const path of nodePaths.get(input.name)!) {
      test(path.name, async () => {
        const { nodes } = await seedMovement(db.pool, singleNodeTemplate(`gen-node-${counter++}`, input.kind, input.actionType));
        const node = nodes[0];
        for (const step of path.steps) {
          await withTransaction(db.pool, (c) => deliverNodeEvent(c, node.id, step.event as NodeEvent, { actor: 'test', deps }));
          const row = (await getNode(db.pool, node.id))!;
          assert.equal(row.node_state, step.to.value, `after ${step.event.type}`);
          assert.deepEqual(nodeContextFromRow(row), step.to.context, `context after ${step.event.type}`);
        }
        await assertLogMatches(node.id, path.steps.at(-1)!.to.value);
      });
    }
  });
}

for (const quorum of requestInputs) {
  describe(`request machine, quorum ${quorum}: generated paths`, () => {
    for (const path of movementPaths.get(quorum)!) {
      test(path.name, async () => {
        const { movement } = await seedMovement(db.pool, singleNodeTemplate(`gen-req-${counter++}`), {
          quorum,
          expiresAt: EXPIRES,
          createdBy: 'requester',
        });
        for (const step of path.steps) {
          await withTransaction(db.pool, (c) => deliverMovementEvent(c, movement.id, step.event as MovementEvent, { actor: 'test', deps }));
          const row = (await getMovement(db.pool, movement.id))!;
          assert.equal(row.request_state, step.to.value, `after ${step.event.type}`);
          assert.deepEqual(movementContextFromRow(row), step.to.context, `context after ${step.event.type}`);
        }
        await assertLogMatches(movement.id, path.steps.at(-1)!.to.value);
      });
    }
  });
}

// --- The template proposal machine: generated paths replayed through its service on real Postgres.

const P_T0 = Date.parse('2034-01-01T00:00:00.000Z');
const P_REVIEW_S = 3600;
const P_CHALLENGE_S = 600;
const pAt = (ms: number) => new Date(P_T0 + ms).toISOString();
const REVIEW_END = P_REVIEW_S * 1000;
const proposalEvents = (s: any): ProposalEvent[] => {
  const approvedAt = s.context.approvedAt ? Date.parse(s.context.approvedAt) - P_T0 : 0;
  const challengeEnd = approvedAt + P_CHALLENGE_S * 1000;
  return [
    { type: 'APPROVE', by: 'approver', at: pAt(1000) },
    { type: 'APPROVE', by: 'proposer', at: pAt(1000) },
    { type: 'APPROVE', by: 'approver', at: pAt(REVIEW_END) },
    { type: 'EXPIRE', at: pAt(REVIEW_END - 1) },
    { type: 'EXPIRE', at: pAt(REVIEW_END) },
    { type: 'WITHDRAW', by: 'proposer', at: pAt(2000) },
    { type: 'WITHDRAW', by: 'approver', at: pAt(2000) },
    { type: 'INSTALL', at: pAt(0) },
    { type: 'FINALIZE', at: pAt(challengeEnd - 1) },
    { type: 'FINALIZE', at: pAt(challengeEnd) },
    { type: 'CHALLENGE', by: 'approver', at: pAt(challengeEnd - 1), reason: 'wrong wallet' },
    { type: 'CHALLENGE', by: 'approver', at: pAt(challengeEnd - 1), reason: ' ' },
    { type: 'CHALLENGE', by: 'approver', at: pAt(challengeEnd), reason: 'late' },
  ];
};
const proposalInputs = [false, true];
const proposalPaths = new Map<boolean, ModelPath[]>();
for (const system of proposalInputs) {
  const paths = coveringPaths(proposalMachine, {
    input: initialProposalContext({ proposedBy: 'proposer', system, reviewExpiresAt: pAt(REVIEW_END), challengeSeconds: P_CHALLENGE_S }),
    events: proposalEvents as (s: unknown) => EventObject[],
    serializeState: (s) => String(s.value),
  });
  // A system proposal exists only as installed at once; its other paths are a person's paths.
  proposalPaths.set(system, system ? paths.filter((p) => p.steps[0]?.event.type === 'INSTALL') : paths);
}
const proposalConfig = { templateReviewWindowSeconds: P_REVIEW_S, templateChallengeWindowSeconds: P_CHALLENGE_S };

/** Delivers one event through the service the routes and sweeps call, on a clock at the event's time. */
async function deliverProposal(id: string, e: ProposalEvent) {
  const d = { pool: db.pool, config: proposalConfig, now: () => new Date(e.at) };
  switch (e.type) {
    case 'APPROVE':
      return approveProposal(d, id, e.by);
    case 'CHALLENGE':
      return challengeProposal(d, id, e.by, e.reason);
    case 'WITHDRAW':
      return withdrawProposal(d, id, e.by);
    case 'FINALIZE':
      return finalizeProposal(d, id);
    case 'EXPIRE':
      return expireProposal(d, id);
    case 'INSTALL':
      throw new Error('INSTALL is only reached through installSystemTemplate');
  }
}

for (const system of proposalInputs) {
  describe(`template proposal machine, ${system ? 'system' : 'person'} proposal: generated paths`, () => {
    for (const path of proposalPaths.get(system)!) {
      test(path.name, async () => {
        const key = `gen-prop-${counter++}`;
        const tpl = parseTemplateDefinition(singleNodeTemplate(key));
        const d = { pool: db.pool, config: proposalConfig, now: () => new Date(P_T0) };
        let id: string;
        let steps = path.steps;
        if (system) {
          // Ferry's own templates: created and INSTALLed in one transaction by installSystemTemplate.
          id = (await installSystemTemplate(d, tpl, 'proposer')).proposal_id!;
          steps = steps.slice(1);
        } else {
          id = ((await proposeTemplate(d, tpl, 'proposer')) as any).proposal.id;
        }
        for (const step of steps) {
          await deliverProposal(id, step.event as ProposalEvent);
          const row = (await getProposal(db.pool, id))!;
          assert.equal(row.proposal_state, step.to.value, `after ${step.event.type}`);
          assert.deepEqual(proposalContextFromRow(row), step.to.context, `context after ${step.event.type}`);
        }
        const last = path.steps.at(-1)!.to;
        const log = await proposalTransitions(db.pool, id);
        assert.deepEqual(log.map((t) => t.seq), log.map((_, i) => i), 'transition log has no gap or duplicate');
        assert.equal(log.at(-1)!.to_state, last.value);
        const replay = replayProposal(log);
        assert.ok(replay.ok, JSON.stringify(replay));
        assert.equal(replay.ok && replay.value, last.value);
        assert.deepEqual(replay.ok && replay.context, last.context, 'the log replays to the stored context');
        const versions = await db.pool.query(
          'SELECT count(*)::int AS n FROM template_versions tv JOIN plan_templates pt ON pt.id = tv.template_id WHERE pt.template_key = $1',
          [key],
        );
        assert.equal(versions.rows[0].n, last.value === 'FINALIZED' ? 1 : 0, 'a version exists exactly when FINALIZED');
      });
    }
  });
}

// --- The credential proposal machine: generated paths replayed through its service on real Postgres.

const K_T0 = Date.parse('2034-06-01T00:00:00.000Z');
const K_REVIEW_S = 3600;
const kAt = (ms: number) => new Date(K_T0 + ms).toISOString();
const credentialEvents = (): CredentialProposalEvent[] => [
  { type: 'CONFIRM', by: 'principal:confirmer', at: kAt(1000) },
  { type: 'CONFIRM', by: 'principal:proposer', at: kAt(1000) },
  { type: 'CONFIRM', by: 'principal:confirmer', at: kAt(K_REVIEW_S * 1000) },
  { type: 'REJECT', by: 'principal:proposer', at: kAt(2000), reason: 'withdrawn' },
  { type: 'REJECT', by: 'principal:confirmer', at: kAt(2000), reason: null },
  { type: 'EXPIRE', at: kAt(K_REVIEW_S * 1000 - 1) },
  { type: 'EXPIRE', at: kAt(K_REVIEW_S * 1000) },
];
const credentialPaths = coveringPaths(credentialProposalMachine, {
  input: initialCredentialProposalContext({ proposedBy: 'principal:proposer', reviewExpiresAt: kAt(K_REVIEW_S * 1000) }),
  events: credentialEvents as (s: unknown) => EventObject[],
  serializeState: (s) => String(s.value),
});
const credentialConfig = { credentialReviewWindowSeconds: K_REVIEW_S };

describe('credential proposal machine: generated paths', () => {
  for (const path of credentialPaths) {
    test(path.name, async () => {
      const name = `gen-principal-${counter++}`;
      const at = (e: { at: string }) => ({ pool: db.pool, config: credentialConfig, now: () => new Date(e.at) });
      const id = (await proposePrincipal({ pool: db.pool, config: credentialConfig, now: () => new Date(K_T0) }, { name, kind: 'person' }, 'principal:proposer')).id;
      for (const step of path.steps) {
        const e = step.event as CredentialProposalEvent;
        if (e.type === 'CONFIRM') await confirmCredentialProposal(at(e), id, e.by);
        else if (e.type === 'REJECT') await rejectCredentialProposal(at(e), id, e.by, e.reason);
        else await expireCredentialProposal(at(e), id);
        const row = (await getCredentialProposal(db.pool, id))!;
        assert.equal(row.proposal_state, step.to.value, `after ${e.type}`);
        assert.deepEqual(credentialContextFromRow(row), step.to.context, `context after ${e.type}`);
      }
      const last = path.steps.at(-1)!.to;
      const log = await credentialProposalTransitions(db.pool, id);
      assert.deepEqual(log.map((t) => t.seq), log.map((_, i) => i), 'transition log has no gap or duplicate');
      const replay = replayCredentialProposal(log);
      assert.ok(replay.ok, JSON.stringify(replay));
      assert.deepEqual(replay.ok && replay.context, last.context, 'the log replays to the stored context');
      const made = await db.pool.query('SELECT count(*)::int AS n FROM principals WHERE name = $1', [name]);
      assert.equal(made.rows[0].n, last.value === 'CONFIRMED' ? 1 : 0, 'the principal exists exactly when CONFIRMED');
    });
  }
});

test('credentialRefusalOf names the same rules as the credential proposal machine guards', () => {
  for (const t of definedTransitions(credentialProposalMachine)) {
    const ctx = initialCredentialProposalContext({ proposedBy: 'p', reviewExpiresAt: kAt(1000) });
    const rules = (t.guard ?? '').replace(/^and\(|\)$/g, '').split(', ').filter(Boolean);
    for (const rule of rules) assert.ok(rule in credentialProposalRules, `${transitionKey(t)}: ${rule} is a rule`);
    assert.notEqual(credentialRefusalOf(t.from as any, ctx, { type: t.event, at: kAt(0), by: 'x', reason: null } as any), 'state', `${transitionKey(t)} is taken in ${t.from}`);
  }
});

// --- The policy proposal machine: generated paths replayed through the policy service on real Postgres.
// One open rule set proposal at a time: each path's proposal is decided (or withdrawn) before the next.

const Y_T0 = Date.parse('2036-01-01T00:00:00.000Z');
const Y_REVIEW_S = 3600;
const Y_COOLDOWN_S = 600;
const yAt = (ms: number) => new Date(Y_T0 + ms).toISOString();
const Y_REVIEW_END = Y_REVIEW_S * 1000;
const policyEvents = (s: any): PolicyProposalEvent[] => {
  const approvedAt = s.context.approvedAt ? Date.parse(s.context.approvedAt) - Y_T0 : 0;
  const coolEnd = approvedAt + Y_COOLDOWN_S * 1000;
  return [
    { type: 'APPROVE', by: 'principal:approver', at: yAt(1000) },
    { type: 'APPROVE', by: 'principal:proposer', at: yAt(1000) },
    { type: 'APPROVE', by: 'principal:approver', at: yAt(Y_REVIEW_END) },
    { type: 'REJECT', by: 'principal:approver', at: yAt(1500), reason: 'not this' },
    { type: 'REJECT', by: 'principal:approver', at: yAt(1500), reason: ' ' },
    { type: 'EXPIRE', at: yAt(Y_REVIEW_END - 1) },
    { type: 'EXPIRE', at: yAt(Y_REVIEW_END) },
    { type: 'WITHDRAW', by: 'principal:proposer', at: yAt(2000) },
    { type: 'WITHDRAW', by: 'principal:approver', at: yAt(2000) },
    { type: 'FINALIZE', at: yAt(coolEnd - 1) },
    { type: 'FINALIZE', at: yAt(coolEnd) },
    { type: 'CHALLENGE', by: 'principal:approver', at: yAt(coolEnd - 1), reason: 'wrong limit' },
    { type: 'CHALLENGE', by: 'principal:approver', at: yAt(coolEnd - 1), reason: ' ' },
    { type: 'CHALLENGE', by: 'principal:approver', at: yAt(coolEnd), reason: 'late' },
  ];
};
const policyPaths = coveringPaths(policyProposalMachine, {
  input: initialPolicyProposalContext({ proposedBy: 'principal:proposer', reviewExpiresAt: yAt(Y_REVIEW_END), challengeSeconds: Y_COOLDOWN_S }),
  events: policyEvents as (s: unknown) => EventObject[],
  serializeState: (s) => String(s.value),
});
const policyConfig = { policyReviewWindowSeconds: Y_REVIEW_S, policyCooldownSeconds: Y_COOLDOWN_S };

async function deliverPolicy(id: string, e: PolicyProposalEvent) {
  const d = { pool: db.pool, config: policyConfig, now: () => new Date(e.at) };
  switch (e.type) {
    case 'APPROVE':
      return approvePolicyProposal(d, id, e.by);
    case 'CHALLENGE':
      return challengePolicyProposal(d, id, e.by, e.reason);
    case 'REJECT':
      return rejectPolicyProposal(d, id, e.by, e.reason);
    case 'WITHDRAW':
      return withdrawPolicyProposal(d, id, e.by);
    case 'FINALIZE':
      return finalizePolicyProposal(d, id);
    case 'EXPIRE':
      return expirePolicyProposal(d, id);
  }
}

describe('policy proposal machine: generated paths', () => {
  for (const path of policyPaths) {
    test(path.name, async () => {
      const d = { pool: db.pool, config: policyConfig, now: () => new Date(Y_T0) };
      const before = await db.pool.query('SELECT coalesce(max(version), 0)::int AS v FROM policy_rule_sets');
      const id = (await proposeRuleSet(d, { rules: [{ id: `gen-${counter++}`, action: { type: 'allow' } }] }, 'principal:proposer')).id;
      for (const step of path.steps) {
        await deliverPolicy(id, step.event as PolicyProposalEvent);
        const row = (await getPolicyProposal(db.pool, id))!;
        assert.equal(row.proposal_state, step.to.value, `after ${step.event.type}`);
        assert.deepEqual(policyContextFromRow(row), step.to.context, `context after ${step.event.type}`);
      }
      const last = path.steps.at(-1)!.to;
      // A path that leaves the proposal open is closed here, so the next path may propose.
      if (last.value === 'PROPOSED' || last.value === 'APPROVED') await withdrawPolicyProposal(d, id, 'principal:proposer');
      const log = await policyProposalTransitions(db.pool, id);
      assert.deepEqual(log.map((t) => t.seq), log.map((_, i) => i), 'transition log has no gap or duplicate');
      const replay = replayPolicyProposal(log);
      assert.ok(replay.ok, JSON.stringify(replay));
      const after = await db.pool.query('SELECT coalesce(max(version), 0)::int AS v FROM policy_rule_sets');
      assert.equal(after.rows[0].v, before.rows[0].v + (last.value === 'FINALIZED' ? 1 : 0), 'a rule set version is written exactly when FINALIZED');
    });
  }
});

test('policyRefusalOf names the same rules as the policy proposal machine guards', () => {
  for (const t of definedTransitions(policyProposalMachine)) {
    const ctx = initialPolicyProposalContext({ proposedBy: 'p', reviewExpiresAt: yAt(Y_REVIEW_END), challengeSeconds: 1 });
    const rules = (t.guard ?? '').replace(/^and\(|\)$/g, '').split(', ').filter(Boolean);
    for (const rule of rules) assert.ok(rule in policyProposalRules, `${transitionKey(t)}: ${rule} is a rule`);
    assert.notEqual(policyRefusalOf(t.from as any, ctx, { type: t.event, at: yAt(0), by: 'x', reason: 'r' } as any), 'state', `${transitionKey(t)} is taken in ${t.from}`);
  }
});

// --- The callback delivery machine: generated paths replayed through the callback lifecycle service
// (src/callbacks/lifecycle.ts, what the delivery worker, the redrive and the stranded sweep call) on
// real Postgres. Callback rows keep no transition log; the row is compared after every step.

const C_T0 = Date.parse('2035-01-01T00:00:00.000Z');
const cAt = (seconds: number) => new Date(C_T0 + seconds * 1000).toISOString();
const callbackEvents = (s: any): CallbackEvent[] => {
  // Each attempt at its own time, so the backoff each failure schedules is visible in the row.
  const at = cAt(100 * (s.context.attempts + 1) + 10 * s.context.redriveCount);
  return [
    { type: 'DELIVERED', at, statusCode: 204 },
    { type: 'DELIVERY_FAILED', at, retriable: true, statusCode: 503, error: 'HTTP 503' },
    { type: 'DELIVERY_FAILED', at, retriable: true, statusCode: null, error: 'connection_refused' },
    { type: 'DELIVERY_FAILED', at, retriable: false, statusCode: null, error: 'destination_disabled' },
    { type: 'REDRIVEN', at: cAt(5000) },
    { type: 'STRANDED_REQUEUED', at: cAt(6000) },
  ];
};
const callbackInputs = [1, 3];
const callbackPaths = new Map<number, ModelPath[]>();
for (const maxAttempts of callbackInputs) {
  callbackPaths.set(
    maxAttempts,
    coveringPaths(callbackMachine, {
      input: initialCallbackContext({ maxAttempts, nextAttemptAt: cAt(0) }),
      events: callbackEvents as (s: unknown) => EventObject[],
      serializeState: (s) => `${s.value}/${s.context.attempts}`,
    }),
  );
}

/** A callback row at the machine's initial snapshot: due at cAt(0). */
async function seedCallback(maxAttempts: number): Promise<string> {
  const { movement } = await seedMovement(db.pool, singleNodeTemplate(`gen-cb-${counter++}`));
  const body = JSON.stringify({ event_type: 'request_test', request_id: movement.id });
  const row = await insertCallback(db.pool, {
    movementId: movement.id,
    eventType: 'request_test',
    nodeKey: null,
    callbackUrl: 'http://127.0.0.1:9/never',
    body,
    maxAttempts,
    timestamp: Math.floor(C_T0 / 1000),
    nonce: '0'.repeat(32),
  });
  await db.pool.query('UPDATE callback_outbox SET next_attempt_at = $2 WHERE id = $1', [row.id, cAt(0)]);
  return row.id;
}

/** Delivers one event the way its caller does: an attempt claims the lease first. */
async function deliverCallbackEvent(id: string, e: CallbackEvent) {
  switch (e.type) {
    case 'DELIVERED':
    case 'DELIVERY_FAILED': {
      const claim = await claimCallback(db.pool, id, { leaseSeconds: 60 });
      assert.ok(claim.row, `claimed for ${e.type}: ${claim.skipped}`);
      const result =
        e.type === 'DELIVERED'
          ? { ok: true as const, statusCode: e.statusCode }
          : { ok: false as const, statusCode: e.statusCode, error: e.error, retriable: e.retriable };
      const row = await withTransaction(db.pool, (c) => recordAttemptOutcome(c, id, claim.row.lease_token!, result, { at: e.at }));
      assert.ok(row, 'the outcome was recorded');
      assert.equal(row.lease_token, null, 'the outcome releases the lease');
      return;
    }
    case 'REDRIVEN':
      await withTransaction(db.pool, (c) => redriveCallback(c, id, { at: e.at }));
      return;
    case 'STRANDED_REQUEUED': {
      const row = (await getCallback(db.pool, id))!;
      assert.equal(await withTransaction(db.pool, (c) => recordStrandedRequeues(c, [row], e.at)), 1);
      return;
    }
  }
}

for (const maxAttempts of callbackInputs) {
  describe(`callback delivery machine, max_attempts ${maxAttempts}: generated paths`, () => {
    for (const path of callbackPaths.get(maxAttempts)!) {
      test(path.name, async () => {
        const id = await seedCallback(maxAttempts);
        assert.deepEqual(callbackContextFromRow((await getCallback(db.pool, id))!), path.steps[0]!.from.context, 'the new row is the initial snapshot');
        for (const step of path.steps) {
          await deliverCallbackEvent(id, step.event as CallbackEvent);
          const row = (await getCallback(db.pool, id))!;
          assert.equal(row.status, step.to.value, `after ${step.event.type}`);
          assert.deepEqual(callbackContextFromRow(row), step.to.context, `context after ${step.event.type}`);
        }
      });
    }
  });
}

test('a callback state that does not take an event changes nothing', async () => {
  const id = await seedCallback(3);
  await deliverCallbackEvent(id, { type: 'DELIVERED', at: cAt(100), statusCode: 200 });
  const sent = (await getCallback(db.pool, id))!;
  await assert.rejects(
    withTransaction(db.pool, (c) => redriveCallback(c, id, { at: cAt(200) })),
    (e: any) => e.code === 'CALLBACK_NOT_REDRIVABLE',
  );
  assert.equal(await withTransaction(db.pool, (c) => recordStrandedRequeues(c, [sent], cAt(300))), 0);
  // An outcome presented with a lease the row does not carry is not recorded.
  assert.equal(await withTransaction(db.pool, (c) => recordAttemptOutcome(c, id, '7c9e6679-7425-40de-944b-e07fc1f90ae7', { ok: true, statusCode: 200 })), null);
  assert.deepEqual(await getCallback(db.pool, id), sent);
});

test('a stranded-requeue mark decided from an earlier attempt is not written over a newer one', async () => {
  const id = await seedCallback(3);
  const stale = (await getCallback(db.pool, id))!;
  await deliverCallbackEvent(id, { type: 'DELIVERY_FAILED', at: cAt(100), retriable: true, statusCode: 500, error: 'HTTP 500' });
  assert.equal(await withTransaction(db.pool, (c) => recordStrandedRequeues(c, [stale], cAt(300))), 0);
  assert.equal((await getCallback(db.pool, id))!.stranded_requeued_at, null);
});

test('refusalOf names the same rules as the proposal machine guards', () => {
  for (const t of definedTransitions(proposalMachine)) {
    const ctx = initialProposalContext({ proposedBy: 'p', system: false, reviewExpiresAt: pAt(REVIEW_END), challengeSeconds: 1 });
    const rules = (t.guard ?? '').replace(/^and\(|\)$/g, '').split(', ').filter(Boolean);
    for (const rule of rules) assert.ok(rule in proposalRules, `${transitionKey(t)}: ${rule} is a rule`);
    assert.notEqual(refusalOf(t.from as any, ctx, { type: t.event, at: pAt(0), by: 'x', reason: 'r' } as any), 'state', `${transitionKey(t)} is taken in ${t.from}`);
  }
});

test('generated paths take every transition of every machine', () => {
  const check = (machine: Parameters<typeof definedTransitions>[0], paths: ModelPath[]) => {
    const walked = walkedTransitions(paths);
    const missing = definedTransitions(machine).map(transitionKey).filter((k) => !walked.has(k));
    assert.deepEqual(missing, [], `${machine.id}: transitions no generated path takes`);
  };
  check(nodeMachine, [...nodePaths.values()].flat());
  check(movementMachine, [...movementPaths.values()].flat());
  check(proposalMachine, [...proposalPaths.values()].flat());
  check(credentialProposalMachine, credentialPaths);
  check(policyProposalMachine, policyPaths);
  check(callbackMachine, [...callbackPaths.values()].flat());
});

test('events a state does not accept are refused with INVALID_TRANSITION and change nothing', async () => {
  const { movement, nodes } = await seedMovement(db.pool, singleNodeTemplate(`gen-refuse-${counter++}`));
  await assert.rejects(
    withTransaction(db.pool, (c) => deliverNodeEvent(c, nodes[0].id, { type: 'DISPATCH_CLAIMED', at: T1 }, { actor: 't', deps })),
    (e: any) => e.code === 'INVALID_TRANSITION',
  );
  await assert.rejects(
    withTransaction(db.pool, (c) => deliverMovementEvent(c, movement.id, { type: 'RESUME', by: 'x' }, { actor: 't', deps })),
    (e: any) => e.code === 'INVALID_TRANSITION',
  );
  // The requester cannot approve their own movement: the four-eyes guard refuses it.
  await assert.rejects(
    withTransaction(db.pool, (c) => deliverMovementEvent(c, movement.id, { type: 'APPROVE', by: 'requester', at: T1 }, { actor: 't', deps })),
    (e: any) => e.code === 'INVALID_TRANSITION',
  );
  assert.equal((await getNode(db.pool, nodes[0].id))!.row_version, 0);
  assert.equal((await getMovement(db.pool, movement.id))!.row_version, 0);
  assert.equal((await transitionsOfEntity(db.pool, movement.id)).length, 1);
});

test('a row written by another machine version is refused as SNAPSHOT_INCOMPATIBLE, not guessed at', async () => {
  const { movement } = await seedMovement(db.pool, singleNodeTemplate(`gen-version-${counter++}`));
  await db.pool.query(`UPDATE movement_requests SET machine_version = '0' WHERE id = $1`, [movement.id]);
  await assert.rejects(
    withTransaction(db.pool, (c) => deliverMovementEvent(c, movement.id, { type: 'REJECT', by: 'x', at: T1 }, { actor: 't', deps })),
    (e: any) => e.code === 'SNAPSHOT_INCOMPATIBLE' && e.httpStatus === 409,
  );
  assert.equal((await getMovement(db.pool, movement.id))!.request_state, 'PENDING_APPROVAL');
});
