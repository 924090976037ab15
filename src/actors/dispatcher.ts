import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidTransitionError, LeaseLostError, TransitionConflictError } from '../errors.ts';
import { FatalMovementError, NothingSentError, TemporaryMovementError, isMovementError } from '../executors/errors.ts';
import { FerryInfraError, infraCauseOf } from '../executors/infra.ts';
import type { ExecutionContext, Executor, PreparedAction, SignResult } from '../executors/protocol.ts';
import { buildSignRequest, signingRefusalAudit, effectConfigOf } from '../executors/sign-request.ts';
import { violation } from '../executors/signers/evm-policy.ts';
import type { NodeEvent } from '../machines/node-machine.ts';
import { addSeconds } from '../machines/observe-policy.ts';
import type { NewArtifact } from '../persistence/artifacts.ts';
import { claimDispatchBatch } from '../persistence/claims.ts';
import { claimsTotal, deferralsTotal, fencedRetriesTotal } from '../metrics.ts';
import { withTransaction, type Client } from '../persistence/db.ts';
import type { LockedMovement } from '../persistence/group-commit.ts';
import type { observationOf } from './observer.ts';
import { databaseTroubleCause } from '../persistence/infra-errors.ts';
import { policyAtDispatch, priceNotReadAhead, pricesForDispatch, type RuleSetMemo } from '../services/policy.ts';
import { priceSourceOf } from '../prices/chainlink.ts';
import { versionsOf, type ArtifactCache } from './artifact-cache.ts';
import { claimedContexts, errorOutcome, errorText, nodeLog, nowIso, outcomeOf, resultArtifacts, type WorkerDeps } from './execution.ts';
import { EXPIRED_RETRY_SECONDS, preparedActionExpired } from './prepared-expiry.ts';
import { deliverBatch, deliverHeld, previewBatch, type BatchOptions, type BatchResult, type CarriedClaim, type NodeItem, type MovementItem } from '../durable/transition.ts';

/**
 * The dispatch step drives READY nodes through preflight -> prepare -> (sign) -> SUBMITTING -> submit,
 * as the reference runtime does, a batch at a time. A movement actor (movement-actor.ts) makes its
 * claims over the rows it holds and runs steps 2 to 5 on them (runDispatches); dispatchBatch makes
 * the claim of step 1 itself, for tests and tools that drive nodes without a runtime:
 *
 *   1. one transaction claims up to FERRY_NODE_DISPATCH_BATCH_SIZE nodes (one statement, see claims.ts) and
 *      moves them to PREPARING with a fresh lease token each (one batched transition);
 *   2. preflight, prepare and sign run for every node of the batch at once, no lock held;
 *   3. one commit records every node's PREPARED (and SIGNED), i.e. SUBMITTING with its attempt
 *      number and idempotency key, or its failure. SUBMITTING is durable before submit() is called;
 *   4. submit() runs for every node in SUBMITTING;
 *   5. one commit records every result; successors they unblock are claimed in that same commit
 *      and go round again from step 2, so one worker carries a movement onward without waiting
 *      for a NOTIFY.
 *
 * Every write after the claim carries the lease: a dispatcher that stalled past the grace, whose
 * node recovery released and another dispatcher claimed again, has its writes refused
 * (LeaseLostError) and stops there. Serial per movement: a movement with a node in PREPARING,
 * AWAITING_SIGNATURE or SUBMITTING is not claimed again, so different requests run in parallel
 * while the nodes of one movement never race each other.
 *
 * Ferry's own database trouble (never the provider's) defers a node instead of failing it: before
 * submit the node goes back to READY with a short delay; a submit that met it is left SUBMITTING
 * for recovery, which asks the provider (for the simulation lane: its ledger) what happened.
 */

const DEFER_SECONDS = 5;
const INFRA_DEFER_SECONDS = 1;
const ACTOR = 'worker:dispatcher';

export interface DispatchOptions {
  limit?: number;
  /** Claim the successors a batch unblocks in its result commit and keep going (default true). */
  carry?: boolean;
}

/** Claims and runs one node (without carrying its movement onward). False when there was nothing to do. */
export async function dispatchOne(deps: WorkerDeps): Promise<boolean> {
  return (await dispatchBatch(deps, { limit: 1, carry: false })) > 0;
}

/** Claims up to `limit` nodes and runs them; returns how many. */
export async function dispatchBatch(deps: WorkerDeps, opts: DispatchOptions = {}): Promise<number> {
  const limit = opts.limit ?? deps.config.dispatchBatchSize;
  const claimed = await claim(deps, limit);
  if (claimed.length === 0) return 0;
  await runDispatches(deps, claimed, opts.carry ?? true);
  return claimed.length;
}

/**
 * Runs claimed dispatches (from a claim, or carried by a commit) until nothing is carried onward.
 * Returns each movement's rows as the last commit that wrote them left them (a movement actor goes
 * on from them without a re-read); a movement whose commits were all refused is missing.
 */
export async function runDispatches(deps: WorkerDeps, claims: CarriedClaim[], carry = true, artifacts?: ArtifactCache, observe?: ObserveAtOnce): Promise<Map<string, LockedMovement>> {
  const latest = new Map<string, LockedMovement>();
  let current = claims;
  while (current.length > 0) current = await runRound(deps, current, carry, latest, artifacts, observe);
  return latest;
}

/** One node's observation, handed in by the movement actor (observer.ts imports this module). */
export type ObserveAtOnce = typeof observationOf;

/** Records, per movement of `ids`, the rows a commit left. */
function remember(latest: Map<string, LockedMovement> | undefined, result: BatchResult, ids: string[]): void {
  if (!latest) return;
  for (const id of ids) latest.set(id, { movement: result.movementOf(id), nodes: result.nodesOf(id) });
}

async function claim(deps: WorkerDeps, limit: number): Promise<CarriedClaim[]> {
  return withTransaction(deps.pool, async (client) => {
    const rows = await claimDispatchBatch(client, limit);
    if (rows.length === 0) {
      claimsTotal.inc({ worker: 'dispatcher', result: 'miss' });
      return [];
    }
    const leases = new Map(rows.map((c) => [c.node.id, randomUUID()]));
    const movements: MovementItem[] = rows
      .filter((c) => c.movement.request_state === 'APPROVED')
      .map((c) => ({ movementId: c.movement.id, event: { type: 'DISPATCH_STARTED' } }));
    const nodes: NodeItem[] = rows.map((c) => ({ nodeId: c.node.id, event: { type: 'DISPATCH_CLAIMED', at: nowIso() }, lease: leases.get(c.node.id)! }));
    const result = await deliverBatch(client, { movements, nodes }, { actor: ACTOR, deps: deps.transitions });
    const out: CarriedClaim[] = [];
    result.nodes.forEach((r, i) => {
      if (isRefusal(r)) {
        claimsTotal.inc({ worker: 'dispatcher', result: 'miss' });
        return;
      }
      claimsTotal.inc({ worker: 'dispatcher', result: 'hit' });
      out.push({ node: r.node, movement: result.movementOf(r.node.request_id), nodes: result.nodesOf(r.node.request_id), lease: nodes[i].lease! });
    });
    return out;
  });
}

const isRefusal = (r: unknown): r is InvalidTransitionError | LeaseLostError => r instanceof InvalidTransitionError || r instanceof LeaseLostError;

/** A node's plan for the submit phase, once its SUBMITTING commit succeeds. */
interface ToSubmit {
  d: CarriedClaim;
  ctx: ExecutionContext;
  executor: Executor;
  prepared: PreparedAction;
  signResult?: SignResult;
}

interface Prepared {
  items: NodeItem[];
  submit?: Omit<ToSubmit, 'd'>;
}

async function runRound(
  deps: WorkerDeps,
  dispatches: CarriedClaim[],
  carry: boolean,
  latest?: Map<string, LockedMovement>,
  artifacts?: ArtifactCache,
  observe?: ObserveAtOnce,
): Promise<CarriedClaim[]> {
  const contexts = await claimedContexts(deps.pool, dispatches, (n) => n.attempt_no + 1, artifacts);
  const prepared = await Promise.all(dispatches.map((d, i) => prepareOne(deps, d, contexts[i])));

  // One commit: every node's SUBMITTING (or why not), written over the rows the claim left (no re-read).
  // Movements created under the treasury policy are checked again in that commit (policyGate).
  let items = prepared.flatMap((p) => p.items);
  const gate = await policyGate(deps, dispatches, prepared, (checked) => (items = checked));
  // A claim not yet written (a movement actor's) is written ahead of these items, over the rows as the database holds them.
  const claimedRows = heldRows(dispatches.map((d) => d.unwritten?.held ?? { movement: d.movement, nodes: d.nodes }));
  const ahead = { movements: dispatches.flatMap((d) => d.unwritten?.movements ?? []), nodes: dispatches.flatMap((d) => d.unwritten?.nodes ?? []) };
  const full = await commit(deps, items, { actor: ACTOR, deps: deps.transitions, held: claimedRows }, gate, ahead);
  if (!full) return [];
  artifacts?.committed(versionsOf(claimedRows), [...ahead.nodes, ...items], full);
  if (ahead.nodes.length > 0) refusals(deps, dispatches, ahead.nodes, { ...full, nodes: full.nodes.slice(0, ahead.nodes.length) });
  // Claims computed over held rows (a movement actor's first claim, a carried successor) count once they are written.
  const claimsWritten = ahead.nodes.filter((n, i) => n.event.type === 'DISPATCH_CLAIMED' && !isRefusal(full.nodes[i])).length;
  if (claimsWritten > 0) claimsTotal.inc({ worker: 'dispatcher', result: 'hit' }, claimsWritten);
  // From here on, the result answers for this round's own items.
  const committed: BatchResult = ahead.nodes.length > 0 ? { ...full, nodes: full.nodes.slice(ahead.nodes.length) } : full;
  remember(latest, committed, [...new Set(dispatches.map((d) => d.movement.id))]);
  const refusedNodes = refusals(deps, dispatches, items, committed);
  const toSubmit: ToSubmit[] = [];
  prepared.forEach((p, i) => {
    const d = dispatches[i];
    if (!p.submit || refusedNodes.has(d.node.id)) return;
    if (committed.nodesOf(d.movement.id).find((n) => n.id === d.node.id)?.node_state !== 'SUBMITTING') return;
    toSubmit.push({ d, ...p.submit });
  });
  if (toSubmit.length === 0) return [];

  const results = await Promise.all(toSubmit.map((s) => submitOne(deps, s)));
  let resultItems = results.filter((r): r is NodeItem => r !== null);
  if (resultItems.length === 0) return [];
  // The rows the SUBMITTING commit left: the result is written without re-reading them.
  const submittedRows = heldRows(toSubmit.map((s) => ({ movement: committed.movementOf(s.d.movement.id), nodes: committed.nodesOf(s.d.movement.id) })));
  // One movement's result that lets successors start is written with their SUBMITTING (next round).
  if (carry && artifacts && submittedRows.length === 1) {
    const preview = previewResults(deps, submittedRows[0], resultItems);
    const next = carriedFrom(preview, submittedRows[0], resultItems);
    if (next) return next;
    // A node the submit left to be observed, whose first observation is due now, is observed first:
    // its submit result and what the observation said are written together (and with the
    // successors' SUBMITTING when the observation lets them start).
    const observed = observe ? await observedAtOnce(deps, preview, submittedRows[0].movement.id, resultItems, artifacts, observe) : [];
    if (observed.length > 0) {
      resultItems = [...resultItems, ...observed];
      const after = carriedWithResults(deps, submittedRows[0], resultItems);
      if (after) return after;
    }
  }
  const done = await commit(deps, resultItems, { actor: ACTOR, deps: deps.transitions, claimUnblocked: carry ? () => randomUUID() : undefined, held: submittedRows });
  if (!done) return [];
  artifacts?.committed(versionsOf(submittedRows), resultItems, done);
  remember(latest, done, [...new Set(toSubmit.map((t) => t.d.movement.id))]);
  refusals(deps, dispatches, resultItems, done);
  for (const _ of done.claimed) claimsTotal.inc({ worker: 'dispatcher', result: 'hit' });
  return done.claimed;
}

/**
 * The observations of the nodes that `results` (submit results, not yet written) leave SUBMITTED or
 * OBSERVING with their first observation due now, asked over the rows the results would leave:
 * the observation of a node is a question to its provider, not an effect, so it may come before
 * the submit result is durable. Until the combined write commits, the node is SUBMITTING in the
 * database, and a crash leaves it to recovery, which asks the provider (as for a result carried
 * with its successors' claims). Empty when nothing is due now, when the machines would refuse a
 * result, or when an observation proposes a fee bump (that one is written and signed by the
 * movement actor's own observation step).
 */
async function observedAtOnce(
  deps: WorkerDeps,
  preview: BatchResult,
  movementId: string,
  results: NodeItem[],
  artifacts: ArtifactCache,
  observe: ObserveAtOnce,
): Promise<NodeItem[]> {
  if (preview.nodes.some(isRefusal)) return [];
  const movement = preview.movementOf(movementId);
  const nodes = preview.nodesOf(movementId);
  const now = Date.now();
  const submitted = new Set(results.map((r) => r.nodeId));
  const due = nodes.filter(
    (n) => submitted.has(n.id) && (n.node_state === 'SUBMITTED' || n.node_state === 'OBSERVING') && (!n.next_observe_at || n.next_observe_at.getTime() <= now),
  );
  if (due.length === 0) return [];
  // The submit results' artifacts are not stored yet: the observation's context gets them from here.
  const unwritten = { artifacts: results.flatMap((r) => r.artifacts ?? []) };
  const contexts = await claimedContexts(deps.pool, due.map((node) => ({ movement, node, nodes, unwritten })), (n) => n.attempt_no, artifacts);
  const observed = await Promise.all(due.map((n, i) => observe(deps, n, contexts[i])));
  if (observed.some((o) => o.proposal !== undefined)) return [];
  return observed.map((o) => o.item);
}

/**
 * The successors a result would let start, claimed over the held rows without writing anything;
 * the result and the claims are written ahead of the successors' own items, in their SUBMITTING
 * commit (runRound), so a 3-node movement writes once per node. The result is durable before any
 * successor's effect (its submit comes after that commit); a crash before it leaves the node in
 * SUBMITTING, for recovery to ask the provider. Null when nothing would start (the result is then
 * written at once) or when the machines would refuse part of it.
 */
export function carriedWithResults(deps: Pick<WorkerDeps, 'transitions'>, held: LockedMovement, results: NodeItem[]): CarriedClaim[] | null {
  return carriedFrom(previewResults(deps, held, results), held, results);
}

/** The rows `results` would leave over `held`, with the successors they would let start claimed. */
function previewResults(deps: Pick<WorkerDeps, 'transitions'>, held: LockedMovement, results: NodeItem[]): BatchResult {
  return previewBatch(held, { nodes: results }, { actor: ACTOR, deps: deps.transitions, claimUnblocked: () => randomUUID() });
}

/** carriedWithResults over a preview already made (previewResults of the same rows and results). */
function carriedFrom(preview: BatchResult, held: LockedMovement, results: NodeItem[]): CarriedClaim[] | null {
  if (preview.claimed.length === 0 || preview.nodes.some(isRefusal)) return null;
  const artifacts = results.flatMap((r) => r.artifacts ?? []);
  const at = nowIso();
  return preview.claimed.map((c, i) => {
    const claim: NodeItem = { nodeId: c.node.id, event: { type: 'DISPATCH_CLAIMED', at }, lease: c.lease };
    // The results go ahead of the first claim only: each item is written once.
    return { ...c, unwritten: i === 0 ? { held, movements: [], nodes: [...results, claim], artifacts } : { held, movements: [], nodes: [claim] } };
  });
}

/**
 * The treasury policy's check at dispatch (src/services/policy.ts, policyAtDispatch), for a round
 * with a node about to record SUBMITTING whose movement was created under a rule set; null for
 * any other round, which commits as before. The gate runs inside the commit's transaction: a
 * refused movement's node fails (PREPARE_FAILED with the refusal's code) instead of recording
 * SUBMITTING, and its prepared action and signature are never stored nor submitted.
 */
async function policyGate(
  deps: WorkerDeps,
  dispatches: CarriedClaim[],
  prepared: Prepared[],
  onItems: (items: NodeItem[]) => void,
): Promise<((client: Client) => Promise<NodeItem[]>) | null> {
  const gated = dispatches.filter((d, i) => prepared[i].submit && d.movement.policy_rule_set_version != null);
  if (gated.length === 0) return null;
  const movements = heldRows(gated.map((d) => ({ movement: d.movement, nodes: d.nodes }))).map((m) => m.movement);
  // Prices for reference-currency rules are read before the SUBMITTING transaction opens: no RPC call under its locks.
  // They are read for the rule set the last gate saw; the gate reads the live one inside the transaction.
  const seen = ruleSetSeen(deps);
  const prices = await pricesForDispatch(deps.pool, deps.prices !== undefined ? deps.prices : priceSourceOf(deps.config.file), movements, new Date(), seen);
  return async (client) => {
    const refused = await policyAtDispatch(client, movements, deps.config.approvalQuorum, new Date(), prices, seen);
    const items = prepared.flatMap((p, i) => {
      const d = dispatches[i];
      const why = p.submit ? refused.get(d.movement.id) : undefined;
      if (!why) return p.items;
      // A price read before this transaction was missing from it (a movement of another asset entered a limit's
      // window meanwhile): prepared again shortly, with the prices read anew, rather than failed.
      if (priceNotReadAhead(why)) {
        nodeLog(deps, 'dispatcher', d.node).info({ code: why.code, err: why.message }, 'dispatch deferred: a price was not read ahead');
        return [item(d, { type: 'DISPATCH_DEFERRED', errorCode: 'PRICE_NOT_READ_AHEAD', errorDetail: why.message, retryAt: addSeconds(nowIso(), INFRA_DEFER_SECONDS) })];
      }
      nodeLog(deps, 'dispatcher', d.node).warn({ code: why.code, err: why.message }, 'dispatch refused by the treasury policy');
      return [item(d, { type: 'PREPARE_FAILED', errorCode: why.code, errorDetail: why.message })];
    });
    onItems(items);
    return items;
  };
}

/** The rule set each worker's gate read last (rule set versions are never rewritten, only added). */
const ruleSetsSeen = new WeakMap<WorkerDeps, RuleSetMemo>();
function ruleSetSeen(deps: WorkerDeps): RuleSetMemo {
  let seen = ruleSetsSeen.get(deps);
  if (!seen) ruleSetsSeen.set(deps, (seen = {}));
  return seen;
}

/** One entry per movement (the first seen): the rows a batch may write over without re-reading them. */
function heldRows(movements: LockedMovement[]): LockedMovement[] {
  const byId = new Map<string, LockedMovement>();
  for (const m of movements) if (!byId.has(m.movement.id)) byId.set(m.movement.id, m);
  return [...byId.values()];
}

/**
 * One batched commit. With `held` rows it is written over them, fenced by each movement's
 * write_version; when a movement was written since (an operator, recovery, a sibling's
 * observation), it is delivered again with the rows re-read under the lock, so the machines decide
 * on what is there now. Ferry's own database trouble is retried a few times (nothing was written);
 * if it persists the nodes stay where they are, and recovery releases or resolves them later.
 */
async function commit(
  deps: WorkerDeps,
  items: NodeItem[],
  opts: BatchOptions,
  gate: ((client: Client) => Promise<NodeItem[]>) | null = null,
  ahead: { movements: MovementItem[]; nodes: NodeItem[] } = { movements: [], nodes: [] },
): Promise<BatchResult | null> {
  if (items.length === 0) return null;
  // What is written ahead of the items (an unwritten claim, a predecessor's result): the result's
  // `nodes` answer for those first, then for the items.
  const withClaims = (nodes: NodeItem[]) => ({ movements: ahead.movements, nodes: [...ahead.nodes, ...nodes] });
  let current = opts;
  for (let attempt = 0; ; attempt++) {
    try {
      const held = current.held;
      return await (gate
        ? withTransaction(deps.pool, async (client: Client) => deliverBatch(client, withClaims(await gate(client)), current))
        : held
        ? (deps.groupWriter?.write(withClaims(items), { ...current, held }) ?? deliverHeld(deps.pool, withClaims(items), { ...current, held }))
        : withTransaction(deps.pool, (client: Client) => deliverBatch(client, withClaims(items), current)));
    } catch (err) {
      if (err instanceof TransitionConflictError && current.held) {
        fencedRetriesTotal.inc({ worker: 'dispatcher' });
        current = { ...current, held: undefined };
        attempt--;
        continue;
      }
      const cause = databaseTroubleCause(err);
      if (!cause) throw err;
      deferralsTotal.inc({ worker: 'dispatcher', cause });
      if (attempt >= 2) {
        deps.log.warn({ err: errorText(err), cause, nodes: items.length }, 'dispatch commit failed on database trouble; recovery will pick the nodes up');
        return null;
      }
      await sleep(200 * 4 ** attempt);
    }
  }
}

/** Logs refused writes; returns the nodes that had one. */
function refusals(deps: WorkerDeps, dispatches: CarriedClaim[], items: NodeItem[], result: BatchResult): Set<string> {
  const refused = new Set<string>();
  result.nodes.forEach((r, i) => {
    if (!isRefusal(r)) return;
    refused.add(items[i].nodeId);
    // The node moved under the dispatch: recovery released it (its lease is gone) or resolved an
    // attempt whose submit outlived the lane's SUBMITTING grace, or an operator acted.
    const d = dispatches.find((x) => x.node.id === items[i].nodeId);
    const log = d ? nodeLog(deps, 'dispatcher', d.node) : deps.log.child({ node_id: items[i].nodeId, worker: 'dispatcher' });
    log.warn({ code: r.code, err: r.message }, 'dispatch result refused: the node moved on');
  });
  return refused;
}

/** A thrown temporary error before submit puts the node back to READY for a later attempt. */
function retryAt(err: unknown): string {
  const hinted = isMovementError(err) ? Number(err.details.retry_after_seconds) : NaN;
  return addSeconds(nowIso(), Number.isFinite(hinted) && hinted > 0 ? hinted : DEFER_SECONDS);
}

function deferInfra(deps: WorkerDeps, d: CarriedClaim, err: unknown, cause: string): NodeItem {
  deferralsTotal.inc({ worker: 'dispatcher', cause });
  nodeLog(deps, 'dispatcher', d.node).warn({ cause, err: errorText(err) }, "dispatch deferred: Ferry's database was unavailable");
  return item(d, { type: 'DISPATCH_DEFERRED', errorCode: 'FERRY_DATABASE_UNAVAILABLE', errorDetail: errorText(err), retryAt: addSeconds(nowIso(), INFRA_DEFER_SECONDS) });
}

const item = (d: CarriedClaim, event: NodeEvent, artifacts?: NewArtifact[]): NodeItem => ({ nodeId: d.node.id, event, fence: d.lease, artifacts });

/** Preflight, prepare and sign one claimed node; the events to commit, and what to submit after. */
async function prepareOne(deps: WorkerDeps, d: CarriedClaim, built: ExecutionContext | { error: unknown }): Promise<Prepared> {
  const node = d.node;
  const failPreparing = (code: string, detail: string): Prepared => ({ items: [item(d, { type: 'PREPARE_FAILED', errorCode: code, errorDetail: detail })] });
  if ('error' in built) {
    const cause = infraCauseOf(built.error);
    if (cause) return { items: [deferInfra(deps, d, built.error, cause)] };
    const err = built.error;
    return failPreparing(isMovementError(err) ? err.code : 'CONTEXT_BUILD_FAILED', errorText(err));
  }
  const ctx = built;

  let executor: Executor;
  try {
    executor = deps.executors.get(node.executor_binding as never);
  } catch (err) {
    return failPreparing(isMovementError(err) ? err.code : 'EXECUTOR_NOT_REGISTERED', errorText(err));
  }

  // Preflight and prepare: no side effect yet, so any failure is safe to report as such.
  let prepared: PreparedAction;
  try {
    // Plan-wide checks first (the CCTP burn's caller alignment); a refusal skips preflight.
    const planned = executor.checkPlan ? await executor.checkPlan(ctx, d.movement.compiled_plan) : null;
    const pre = planned ?? (await executor.preflight(ctx));
    if (pre) {
      const event: NodeEvent =
        pre.next_state === 'SKIPPED'
          ? { type: 'PREFLIGHT_SKIPPED', errorCode: pre.error_code ?? 'PREFLIGHT_SKIPPED', errorDetail: pre.error_detail ?? null }
          : { type: 'PREFLIGHT_FAILED', errorCode: pre.error_code ?? 'PREFLIGHT_FAILED', errorDetail: pre.error_detail ?? null };
      return { items: [item(d, event)] };
    }
    const prep = await executor.prepare(ctx);
    if (!prep.prepared_action) {
      return failPreparing(prep.error_code ?? 'PREPARE_RETURNED_NO_ACTION', prep.error_detail ?? 'prepare() returned no prepared_action');
    }
    prepared = prep.prepared_action;
  } catch (err) {
    if (err instanceof FerryInfraError) return { items: [deferInfra(deps, d, err, err.cause_)] };
    if (err instanceof TemporaryMovementError) {
      return { items: [item(d, { type: 'DISPATCH_DEFERRED', errorCode: err.code, errorDetail: errorText(err), retryAt: retryAt(err) })] };
    }
    return failPreparing(isMovementError(err) ? err.code : 'PREPARE_ERROR', errorText(err));
  }

  // Expired already: never signed (nor stored); prepared again (prepared-expiry.ts).
  const expired = preparedActionExpired(prepared, prepared.signing_required ? 'sign' : 'submit');
  if (expired) return { items: [item(d, { type: 'DISPATCH_DEFERRED', ...expired, retryAt: addSeconds(nowIso(), EXPIRED_RETRY_SECONDS) })] };

  const preparedArtifact: NewArtifact = {
    request_id: node.request_id,
    request_node_id: node.id,
    attempt_no: ctx.attempt_no,
    artifact_type: 'prepared_action',
    artifact_digest: prepared.payload_hash,
    content_format: 'json',
    content_inline: JSON.stringify(prepared),
    content_uri: null,
    artifact_metadata: { action_type: prepared.action_type, signing_required: prepared.signing_required },
  };
  // Without signing, PREPARED is the SUBMITTING transition; with signing, PREPARED and SIGNED
  // commit together after the signer answered. Either way the attempt number and idempotency key
  // are durable before submit() is called.
  const preparedItem = item(d, { type: 'PREPARED', signingRequired: prepared.signing_required, at: nowIso() }, [preparedArtifact]);
  if (!prepared.signing_required) return { items: [preparedItem], submit: { ctx, executor, prepared } };

  const signed = await sign(deps, d, ctx, prepared);
  if ('failed' in signed) return { items: [preparedItem, signed.failed] };
  return { items: [preparedItem, signed.item], submit: { ctx, executor, prepared, signResult: signed.result } };
}

async function sign(
  deps: WorkerDeps,
  d: CarriedClaim,
  ctx: ExecutionContext,
  prepared: PreparedAction,
): Promise<{ result: SignResult; item: NodeItem } | { failed: NodeItem }> {
  const node = d.node;
  if (!node.signer_binding) {
    return { failed: item(d, { type: 'SIGNING_FAILED', errorCode: 'MISSING_SIGNER_BINDING', errorDetail: 'missing signer binding' }) };
  }
  try {
    // One original per attempt: the SUBMITTING commit stores the original's signature and starts
    // the attempt (the machine's beginSubmitAttempt), so the attempt being prepared here cannot
    // have one. Records that say otherwise are refused rather than signed over: a second distinct
    // payload for the same attempt would be a second payment (docs/signing.md, "One effect per
    // attempt"). A version signed before a crash, whose SUBMITTING never committed, left nothing
    // here and nothing left the process: preparing the attempt again is safe.
    if ((ctx.attempt_artifacts ?? []).some((a) => a.artifact_type === 'signature')) {
      throw violation('attempt_already_signed', `attempt ${ctx.attempt_no} already holds a signed version; another is signed only as its replacement`);
    }
    const signer = deps.signers.get(node.signer_binding as never);
    const request = buildSignRequest({ ctx, prepared, plan: d.movement.compiled_plan, ...effectConfigOf(deps.config) });
    const result = await signer.sign(request);
    const artifact: NewArtifact = {
      request_id: node.request_id,
      request_node_id: node.id,
      attempt_no: ctx.attempt_no,
      artifact_type: 'signature',
      artifact_digest: prepared.payload_hash,
      content_format: result.signature_format,
      content_inline: result.signature,
      content_uri: null,
      artifact_metadata: { signer_ref: result.signer_ref },
    };
    return { result, item: item(d, { type: 'SIGNED', at: nowIso() }, [artifact]) };
  } catch (err) {
    if (err instanceof FerryInfraError) return { failed: deferInfra(deps, d, err, err.cause_) };
    if (err instanceof TemporaryMovementError) {
      return { failed: item(d, { type: 'DISPATCH_DEFERRED', errorCode: err.code, errorDetail: errorText(err), retryAt: retryAt(err) }) };
    }
    const code = isMovementError(err) ? err.code : 'SIGNING_ERROR';
    // The refusal is audited in the commit that records it.
    return { failed: { ...item(d, { type: 'SIGNING_FAILED', errorCode: code, errorDetail: errorText(err) }), audits: [signingRefusalAudit(ctx, err, code)] } };
  }
}

/** The pre-submit check and submit() of one node in SUBMITTING; the event to commit, or null to leave it to recovery. */
async function submitOne(deps: WorkerDeps, s: ToSubmit): Promise<NodeItem | null> {
  const { d, ctx, executor, prepared, signResult } = s;
  const attempt = ctx.attempt_no;
  if (executor.preSubmitCheck) {
    try {
      await executor.preSubmitCheck(ctx, prepared);
    } catch (err) {
      if (err instanceof TemporaryMovementError) {
        return item(d, { type: 'PRE_SUBMIT_CHECK_DEFERRED', errorCode: 'PRE_SUBMIT_CHECK_TEMPORARY_ERROR', errorDetail: errorText(err), retryAt: retryAt(err) });
      }
      const code = err instanceof FatalMovementError ? 'PRE_SUBMIT_CHECK_FATAL_ERROR' : 'PRE_SUBMIT_CHECK_UNEXPECTED_ERROR';
      return item(d, { type: 'PRE_SUBMIT_CHECK_FAILED', errorCode: code, errorDetail: errorText(err) });
    }
  }

  const log = nodeLog(deps, 'dispatcher', d.node, attempt);
  // Expired while it was signed or checked: never submitted; the attempt is abandoned (prepared-expiry.ts).
  const expired = preparedActionExpired(prepared, 'submit');
  if (expired) {
    log.warn({ code: expired.errorCode, expires_at: prepared.expires_at }, 'prepared action expired before submit; the node is prepared again');
    return item(d, { type: 'PRE_SUBMIT_CHECK_DEFERRED', ...expired, retryAt: addSeconds(nowIso(), EXPIRED_RETRY_SECONDS) });
  }
  log.debug('submitting');
  try {
    const result = await executor.submit(ctx, prepared, { signResult });
    const outcome = outcomeOf(result, ['COMPLETED', 'SUBMITTED', 'OBSERVING', 'FAILED', 'UNKNOWN'], 'UNKNOWN');
    const artifacts = resultArtifacts(d.node, attempt, result);
    const at = nowIso();
    const observing = outcome.nextState === 'SUBMITTED' || outcome.nextState === 'OBSERVING';
    const nextObserveAt = observing && result.retry_after_seconds ? addSeconds(at, result.retry_after_seconds) : null;
    return item(d, { type: 'SUBMIT_RESULT', outcome, at, nextObserveAt }, artifacts);
  } catch (err) {
    if (err instanceof NothingSentError) {
      // The executor (in this process) is certain nothing left: abandoned like a failed pre-submit
      // check, the node is prepared again as a new attempt.
      log.warn({ code: err.code }, 'submit sent nothing; the node is prepared again');
      return item(d, { type: 'PRE_SUBMIT_CHECK_DEFERRED', errorCode: err.code, errorDetail: errorText(err), retryAt: retryAt(err) });
    }
    if (err instanceof FerryInfraError) {
      // Ferry's own database failed around the submit: whether it happened is for recovery to
      // find out (it asks the provider), never a reason to call the node UNKNOWN or submit again.
      deferralsTotal.inc({ worker: 'dispatcher', cause: err.cause_ });
      log.warn({ cause: err.cause_ }, "submit met Ferry's database trouble; left SUBMITTING for recovery");
      return null;
    }
    // A fatal error is the provider's definite refusal; anything else (timeout, connection reset,
    // a bug) leaves us unable to tell whether money moved: UNKNOWN, for recovery to resolve.
    const outcome =
      err instanceof FatalMovementError
        ? errorOutcome('FAILED', err.code, err.message)
        : errorOutcome('UNKNOWN', isMovementError(err) ? err.code : 'SUBMIT_ERROR', errorText(err));
    return item(d, { type: 'SUBMIT_RESULT', outcome, at: nowIso(), nextObserveAt: null });
  }
}
