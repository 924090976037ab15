import { createHash } from 'node:crypto';
import { effectConfigOf } from '../executors/sign-request.ts';
import { destinationForMovement } from './callback-destinations.ts';
import { assertCallbackUrlAllowed } from '../callbacks/url-policy.ts';
import { setMovementDestination } from '../persistence/callback-destinations.ts';
import type { FerryConfig } from '../config.ts';
import { FerryError, InvalidTransitionError, NotFoundError, ValidationError } from '../errors.ts';
import { summarizeNodes } from '../machines/node-summary.ts';
import { MOVEMENT_MACHINE_ID, type MovementEvent } from '../machines/movement-machine.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction, type Client, type Pool } from '../persistence/db.ts';
import {
  findByIdempotencyKey,
  getMovement,
  isMovementId,
  lockMovement,
  nodeByKey,
  nodesOfMovement,
  type NodeRow,
  type MovementRow,
} from '../persistence/movements.ts';
import { actorAliases } from '../persistence/principals.ts';
import { openProposalOf } from '../persistence/template-proposals.ts';
import { getTemplateVersion } from '../persistence/templates.ts';
import { canonicalJson } from '../plan/canonical-json.ts';
import { compilePlan, compiledPlanHash, type CompileOptions } from '../plan/compile.ts';
import type { CompiledPlan } from '../plan/types.ts';
import type { BindingCatalog } from '../plan/validate.ts';
import { pinExpectedEffect, type PinnedEffect } from '../executors/evm/expected-effect.ts';
import { startMovement } from './start-movement.ts';
import { policyForApproval, policyForNewMovement, priceNotReadAhead, pricesReadAhead, settleDuePolicyProposals } from './policy.ts';
import { recordMovementPolicy } from '../persistence/policy.ts';
import { priceSourceOf } from '../prices/chainlink.ts';
import type { PriceSource } from '../prices/price-source.ts';
import { deliverNodeEvent, deliverMovementEvent, type TransitionDeps } from '../durable/transition.ts';

/**
 * What the API does to a movement, one function per verb. Each runs in ONE transaction that holds
 * the movement row lock, delivers the event through the durable transition function (the machines
 * decide what is allowed) and writes its audit row, so a refused or failed call leaves nothing
 * behind. The checks made here before delivering exist to give callers a precise answer (four-eyes,
 * stale plan, expired window); the machines' guards enforce the same rules again.
 */

export interface MovementServiceDeps {
  pool: Pool;
  config: Pick<FerryConfig, 'approvalTtlSeconds' | 'approvalQuorum' | 'callbackAllowedHosts'> & Partial<Pick<FerryConfig, 'file' | 'evmMaxFeePerGasCapWei'>>;
  transitions: TransitionDeps;
  /** The registered executors and signers; a plan bound to anything else is refused at creation. */
  bindings?: BindingCatalog;
  /** Where the policy reads prices for amounts in a reference currency; unset: the configuration's price_feeds. */
  prices?: PriceSource | null;
}

/** The price source a movement service uses: its own, else the configuration's feeds (none: null). */
export function pricesOf(deps: Pick<MovementServiceDeps, 'prices' | 'config'>): PriceSource | null {
  return deps.prices !== undefined ? deps.prices : priceSourceOf(deps.config.file);
}

export interface Movement {
  movement: MovementRow;
  nodes: NodeRow[];
}

export interface CreateMovementInput {
  /** The principal creating it (`principal:<id>`); it can never approve the movement. */
  actor: string;
  templateKey: string;
  templateVersion?: number;
  intent: Record<string, unknown>;
  inputParams?: Record<string, unknown>;
  callbackUrl?: string | null;
  /** A registered callback destination (name or id), instead of callbackUrl. */
  callbackDestination?: string | null;
  idempotencyKey?: string | null;
}

/** A movement as the API's body and the movement queue's message spell it (snake_case, on the wire). */
export interface MovementOrder {
  template_key: string;
  template_version?: number;
  intent: Record<string, unknown>;
  input_params?: Record<string, unknown>;
  callback_url?: string | null;
  callback_destination?: string | null;
}

/** The create input of a movement ordered on the wire, by `actor`, under the client's key (if any). */
export function createInputOf(order: MovementOrder, actor: string, idempotencyKey: string | null): CreateMovementInput {
  return {
    actor,
    templateKey: order.template_key,
    templateVersion: order.template_version,
    intent: order.intent,
    inputParams: order.input_params,
    callbackUrl: order.callback_url ?? null,
    callbackDestination: order.callback_destination ?? null,
    idempotencyKey,
  };
}

export interface CreatedMovement extends Movement {
  /** True when an earlier call with the same Idempotency-Key and body created it. */
  replayed: boolean;
}

const IDEMPOTENCY_CONSTRAINT = 'movement_requests_idempotency';

/**
 * The fingerprint an Idempotency-Key is bound to: SHA-256 of the canonical JSON of the request as
 * Ferry understood it (absent optional fields normalised), so key order and whitespace do not count.
 */
export function movementFingerprint(input: Omit<CreateMovementInput, 'actor' | 'idempotencyKey'>): string {
  const body = {
    template_key: input.templateKey,
    template_version: input.templateVersion ?? null,
    intent: input.intent,
    input_params: input.inputParams ?? {},
    callback_url: input.callbackUrl ?? null,
    // Only when given, so fingerprints of movements without one stay what they were.
    ...(input.callbackDestination ? { callback_destination: input.callbackDestination } : {}),
  };
  return createHash('sha256').update(canonicalJson(body), 'utf8').digest('hex');
}

/**
 * What compilation needs from the configuration: the symbols of the token addresses in evm.tokens,
 * so a node bound to a token by address is held to the intent's asset as one bound by symbol is, and
 * which symbols are tokens (a native transfer cannot move them).
 */
export function compileOptionsOf(config: Partial<Pick<FerryConfig, 'file'>>): CompileOptions {
  const tokens = config.file?.evm.tokens ?? [];
  return {
    tokenSymbolOf: (address, chainId) => {
      const matches = tokens.filter((t) => t.address.toLowerCase() === address.toLowerCase() && (chainId === null || t.chain_id === chainId));
      // Without a chain, an address listed under two symbols names no one asset.
      const symbols = new Set(matches.map((t) => t.symbol));
      return symbols.size === 1 ? [...symbols][0] : undefined;
    },
    isTokenSymbol: (symbol, chainId) => tokens.some((t) => t.symbol.toUpperCase() === symbol.toUpperCase() && (chainId === null || t.chain_id === chainId)),
  };
}

/**
 * A template that has no live version yet but an open proposal: still a 404 (nothing can be
 * created from it), with what a person needs to know instead of a bare "not found": the proposal,
 * its state and, once approved, when its challenge window ends and it goes live.
 */
async function refuseNotYetLive(client: Client, templateKey: string): Promise<void> {
  const open = await openProposalOf(client, templateKey);
  if (!open) return;
  const when =
    open.proposal_state === 'APPROVED' && open.challenge_ends_at
      ? `approved, and live once its challenge window ends at ${open.challenge_ends_at.toISOString()}`
      : 'proposed, waiting for its approval';
  throw new FerryError('NOT_FOUND', `template ${templateKey} has no live version yet: proposal ${open.id} is ${when}`, {
    kind: 'template',
    id: templateKey,
    proposal_id: open.id,
    proposal_state: open.proposal_state,
    live_at: open.proposal_state === 'APPROVED' ? (open.challenge_ends_at?.toISOString() ?? null) : null,
  });
}

/**
 * The expected effect of every signing node, pinned with the plan (docs/signing.md, "Pinned at
 * approval"): what the approvers see and what dispatch signs against, whatever the configuration
 * says by then. Without a configuration file (tests of the API alone) nothing is pinned.
 */
function pinnedEffects(plan: CompiledPlan, intent: Record<string, unknown>, config: MovementServiceDeps['config']): Map<string, PinnedEffect> {
  const pinned = new Map<string, PinnedEffect>();
  if (!config.file) return pinned;
  for (const node of plan.nodes) {
    if (!node.signer_binding) continue;
    pinned.set(node.node_key, pinExpectedEffect({ plan, nodeKey: node.node_key, intent, ...effectConfigOf({ ...config, file: config.file }) }));
  }
  return pinned;
}

export async function createMovement(deps: MovementServiceDeps, input: CreateMovementInput): Promise<CreatedMovement> {
  const fingerprint = movementFingerprint(input);
  const key = input.idempotencyKey ?? null;
  if (key) {
    const earlier = await replayOf(deps.pool, input.actor, key, fingerprint);
    if (earlier) return earlier;
  }
  if (input.callbackUrl && input.callbackDestination) {
    throw new ValidationError('give callback_url or callback_destination, not both', { field: 'callback_destination' });
  }
  if (input.callbackUrl) assertCallbackUrlAllowed(input.callbackUrl, deps.config);

  // A policy change whose cool-down has passed is live before this movement is checked against it.
  await settleDuePolicyProposals({ pool: deps.pool });
  // Prices for reference-currency rules and limits are read before the transaction: no RPC call under its locks.
  for (let attempt = 0; ; attempt++) {
    const prices = await pricesReadAhead(deps.pool, pricesOf(deps), input.intent, new Date());
    try {
      return await withTransaction(deps.pool, async (client) => {
        const version = await getTemplateVersion(client, input.templateKey, input.templateVersion);
        if (!version) {
          if (input.templateVersion === undefined) await refuseNotYetLive(client, input.templateKey);
          const what = input.templateVersion === undefined ? input.templateKey : `${input.templateKey} version ${input.templateVersion}`;
          throw new NotFoundError('template', what);
        }
        const inputParams = input.inputParams ?? {};
        const plan = compilePlan(version, input.intent, inputParams, deps.bindings, compileOptionsOf(deps.config));
        const destination = input.callbackDestination ? await destinationForMovement(client, input.callbackDestination) : null;
        const now = new Date();
        const expiresAt = new Date(now.getTime() + deps.config.approvalTtlSeconds * 1000).toISOString();
        // The treasury policy (services/policy.ts): refuses the movement, or says the quorum it needs.
        const policy = await policyForNewMovement(
          client,
          { templateKey: plan.template_key, intent: input.intent, nodes: plan.nodes, createdBy: input.actor },
          deps.config.approvalQuorum,
          now,
          prices,
        );
        const started = await startMovement(client, {
          plan,
          intent: input.intent,
          inputParams,
          createdBy: input.actor,
          quorum: policy.quorum,
          expiresAt,
          callbackUrl: input.callbackUrl ?? null,
          idempotencyKey: key,
          fingerprint,
          expectedEffects: pinnedEffects(plan, input.intent, deps.config),
        });
        const { nodes } = started;
        await recordMovementPolicy(client, started.movement.id, policy.record);
        if (destination) await setMovementDestination(client, started.movement.id, destination);
        const movement = (await getMovement(client, started.movement.id))!;
        await writeAudit(client, {
          actor: input.actor,
          action: 'movement.create',
          entity_type: 'movement',
          entity_id: movement.id,
          details: {
            template_key: movement.template_key,
            template_version: movement.template_version,
            compiled_plan_hash: movement.compiled_plan_hash,
            approval_quorum: movement.approval_quorum,
            expires_at: expiresAt,
            idempotency_key: key,
            ...(destination ? { callback_destination: destination.name } : {}),
            policy: {
              rule_set_version: policy.record.rule_set_version,
              rule_id: policy.record.rule_id,
              action: policy.record.action,
              destination_entry: policy.record.destination_entry,
              ...(policy.record.approvers ? { approvers_from: policy.record.approvers.principals } : {}),
              ...(policy.velocity.length ? { velocity: policy.velocity } : {}),
              ...(policy.prices.length ? { prices: policy.prices } : {}),
            },
          },
        });
        return { movement, nodes, replayed: false };
      });
    } catch (err) {
      // A price the check needed was not read ahead (a movement of another asset entered a limit's window meanwhile): once more.
      if (attempt === 0 && priceNotReadAhead(err)) continue;
      // Two calls with one key raced: the loser answers exactly as a later retry would.
      if (key && (err as { constraint?: string }).constraint === IDEMPOTENCY_CONSTRAINT) {
        const earlier = await replayOf(deps.pool, input.actor, key, fingerprint);
        if (earlier) return earlier;
      }
      throw err;
    }
  }
}

async function replayOf(pool: Pool, actor: string, key: string, fingerprint: string): Promise<CreatedMovement | null> {
  // A key belongs to the principal: a retry through another of its tokens, or one that straddles an
  // upgrade (the first call recorded `token:<id>`), finds the movement the first call created.
  const earlier = await findByIdempotencyKey(pool, await actorAliases(pool, actor), key);
  if (!earlier) return null;
  if (earlier.request_fingerprint !== fingerprint) {
    throw new FerryError(
      'IDEMPOTENCY_KEY_REUSED',
      `Idempotency-Key ${JSON.stringify(key)} was already used for a different request body (movement ${earlier.id})`,
      { idempotency_key: key, movement_id: earlier.id },
    );
  }
  return { movement: earlier, nodes: await nodesOfMovement(pool, earlier.id), replayed: true };
}

/** A movement read without locks, for GET. */
/** The movement's row, or 404: an id that is not a UUID names no movement and never reaches a uuid cast. */
export async function requireMovement(pool: Pool, id: string): Promise<MovementRow> {
  const movement = isMovementId(id) ? await getMovement(pool, id) : null;
  if (!movement) throw new NotFoundError('movement', id);
  return movement;
}

export async function readMovement(pool: Pool, id: string): Promise<Movement> {
  const movement = await requireMovement(pool, id);
  return { movement, nodes: await nodesOfMovement(pool, id) };
}

// ---------------------------------------------------------------------------------------------
// Decisions on an existing movement

interface Decision {
  actor: string;
  action: string;
  details?: Record<string, unknown>;
}

/**
 * The shape every decision shares: lock the movement row (so a concurrent approver, the expiry sweep
 * or a worker waits for us, or we for them), let `decide` check and deliver, write the audit row,
 * and return the movement as committed.
 */
async function decideOn(
  deps: MovementServiceDeps,
  id: string,
  decision: Decision,
  decide: (client: Client, movement: MovementRow) => Promise<Record<string, unknown> | void>,
): Promise<Movement> {
  if (!isMovementId(id)) throw new NotFoundError('movement', id);
  return withTransaction(deps.pool, async (client) => {
    const locked = await lockMovement(client, id);
    if (!locked) throw new NotFoundError('movement', id);
    const extra = (await decide(client, locked)) ?? {};
    const movement = (await getMovement(client, id))!;
    await writeAudit(client, {
      actor: decision.actor,
      action: decision.action,
      entity_type: 'movement',
      entity_id: id,
      details: { from_state: locked.request_state, to_state: movement.request_state, ...decision.details, ...extra },
    });
    return { movement, nodes: await nodesOfMovement(client, id) };
  });
}

function deliver(deps: MovementServiceDeps, client: Client, id: string, event: MovementEvent, actor: string) {
  return deliverMovementEvent(client, id, event, { actor, deps: deps.transitions });
}

function approvalWindowClosed(movement: MovementRow): FerryError {
  const at = movement.expires_at?.toISOString() ?? null;
  return new FerryError(
    'APPROVAL_EXPIRED',
    `movement ${movement.id} can no longer be approved: its approval window closed at ${at}`,
    { reason: 'APPROVAL_EXPIRED', machine: MOVEMENT_MACHINE_ID, entity_id: movement.id, state: movement.request_state, event: 'APPROVE', expires_at: at },
  );
}

/** The plan an approver reviewed must be the plan the movement will run, and that plan must be intact. */
function assertPlanHash(movement: MovementRow, reviewed: string): void {
  if (reviewed !== movement.compiled_plan_hash) {
    throw new FerryError(
      'STALE_PLAN_HASH',
      `compiled_plan_hash ${reviewed} is not the plan of movement ${movement.id}; review the current plan and approve its hash`,
      { movement_id: movement.id, expected: movement.compiled_plan_hash, received: reviewed },
    );
  }
  const stored = movement.compiled_plan as unknown as CompiledPlan;
  let recomputed: string | null = null;
  try {
    recomputed = compiledPlanHash(stored, movement.intent, movement.input_params);
  } catch {
    recomputed = null;
  }
  if (recomputed !== movement.compiled_plan_hash) {
    // The stored plan no longer hashes to what was reviewed: it was changed behind Ferry's back.
    throw new FerryError('STALE_PLAN_HASH', `the stored plan of movement ${movement.id} no longer matches its compiled_plan_hash; it cannot be approved`, {
      movement_id: movement.id,
      expected: movement.compiled_plan_hash,
      reason: 'STORED_PLAN_DRIFT',
    });
  }
}

export async function approveMovement(
  deps: MovementServiceDeps,
  id: string,
  input: { actor: string; compiledPlanHash: string; /** The standing order this approval is given under (its run). */ standingOrderId?: string },
): Promise<Movement> {
  await settleDuePolicyProposals({ pool: deps.pool });
  // The intent never changes after creation: its prices are read before the row is locked.
  const unlocked = isMovementId(id) ? await getMovement(deps.pool, id) : null;
  for (let attempt = 0; ; attempt++) {
    const prices = unlocked ? await pricesReadAhead(deps.pool, pricesOf(deps), unlocked.intent, new Date()) : null;
    try {
      return await approveWith(deps, id, input, prices);
    } catch (err) {
      // A price the check needed was not read ahead (a movement of another asset entered a limit's window meanwhile): once more.
      if (attempt === 0 && priceNotReadAhead(err)) continue;
      throw err;
    }
  }
}

function approveWith(
  deps: MovementServiceDeps,
  id: string,
  input: { actor: string; compiledPlanHash: string; standingOrderId?: string },
  prices: PriceSource | null,
): Promise<Movement> {
  const { actor } = input;
  const under = input.standingOrderId ? { standing_order_id: input.standingOrderId } : {};
  return decideOn(deps, id, { actor, action: 'movement.approve', details: { compiled_plan_hash: input.compiledPlanHash, ...under } }, async (client, movement) => {
    // Four-eyes and quorum count principals: every token of the approver's principal is the approver,
    // including rows recorded as `token:<id>` before principals existed. The machine compares actor
    // ids; these checks are what make an older row's token id count as its principal.
    const same = new Set(await actorAliases(client, actor));
    if (same.has(movement.created_by)) {
      throw new FerryError('FOUR_EYES_VIOLATION', `the principal that created movement ${id} cannot approve it, with any of its tokens; a second person must`, {
        movement_id: id,
      });
    }
    if ((movement.approvals ?? []).some((a) => same.has(a.by))) {
      throw new FerryError('ALREADY_APPROVED', `this principal has already approved movement ${id}; approvals must come from distinct principals`, {
        movement_id: id,
        approvals: movement.approvals.length,
        quorum: movement.approval_quorum,
      });
    }
    if (movement.request_state === 'EXPIRED') throw approvalWindowClosed(movement);
    if (movement.request_state !== 'PENDING_APPROVAL') {
      throw new InvalidTransitionError(MOVEMENT_MACHINE_ID, id, movement.request_state, 'APPROVE');
    }
    assertPlanHash(movement, input.compiledPlanHash);
    // The clock is read with the row lock held: whoever holds the lock decides on one instant.
    const at = new Date();
    if (movement.expires_at && at.getTime() >= movement.expires_at.getTime()) throw approvalWindowClosed(movement);
    // The treasury policy: who counts, whether the live rule set still allows it, the velocity limits.
    const policy = await policyForApproval(client, movement, actor, at, prices);
    await deliver(deps, client, id, { type: 'APPROVE', by: actor, at: at.toISOString() }, actor);
    return {
      approvals: movement.approvals.length + 1,
      quorum: movement.approval_quorum,
      policy: { rule_set_version: movement.policy_rule_set_version ?? null, rule_id: movement.policy_rule_id ?? null, ...policy },
    };
  });
}

export async function rejectMovement(deps: MovementServiceDeps, id: string, input: { actor: string; reason?: string }): Promise<Movement> {
  const { actor, reason } = input;
  return decideOn(deps, id, { actor, action: 'movement.reject', details: { reason: reason ?? null } }, async (client) => {
    await deliver(deps, client, id, { type: 'REJECT', by: actor, at: new Date().toISOString(), ...(reason ? { reason } : {}) }, actor);
  });
}

/**
 * `scope: 'own'` (requesters) may cancel only movements the same principal created; `'any'` (operators)
 * may cancel every movement. Checked under the movement lock, before the machine decides.
 */
export async function cancelMovement(
  deps: MovementServiceDeps,
  id: string,
  input: { actor: string; reason?: string; scope: 'own' | 'any' },
): Promise<Movement> {
  const { actor, reason } = input;
  return decideOn(deps, id, { actor, action: 'movement.cancel', details: { reason: reason ?? null } }, async (client, locked) => {
    if (input.scope === 'own' && !(await actorAliases(client, actor)).includes(locked.created_by)) {
      throw new FerryError('NOT_MOVEMENT_OWNER', `movement ${id} was created by someone else; only its creator or an operator can cancel it`, {
        entity_id: id,
      });
    }
    // Read under the movement lock: node writers lock the movement first, so this summary holds.
    const summary = summarizeNodes(await nodesOfMovement(client, id));
    await deliver(deps, client, id, { type: 'CANCEL', by: actor, summary, ...(reason ? { reason } : {}) }, actor);
  });
}

export async function resumeMovement(deps: MovementServiceDeps, id: string, input: { actor: string }): Promise<Movement> {
  const { actor } = input;
  return decideOn(deps, id, { actor, action: 'movement.resume' }, async (client) => {
    await deliver(deps, client, id, { type: 'RESUME', by: actor }, actor);
  });
}

/**
 * Re-readies a FAILED node: the node machine decides (its lane must allow retries), then the movement
 * machine decides whether the movement goes back to EXECUTING.
 */
export async function retryMovementNode(
  deps: MovementServiceDeps,
  id: string,
  input: { actor: string; nodeKey: string },
): Promise<Movement> {
  const { actor, nodeKey } = input;
  return decideOn(deps, id, { actor, action: 'movement.retry', details: { node_key: nodeKey } }, async (client) => {
    const node = await nodeByKey(client, id, nodeKey);
    if (!node) throw new NotFoundError('node', `${nodeKey} of movement ${id}`);
    if (node.node_state === 'FAILED' && !node.retryable) {
      // The node machine would refuse too (laneAllowsRetry); say why instead of only "not accepted".
      throw new FerryError('INVALID_TRANSITION', `node ${nodeKey} of movement ${id} failed on a lane that does not allow retries`, {
        reason: 'RETRY_NOT_ALLOWED',
        machine: 'ferry.node',
        entity_id: node.id,
        node_key: nodeKey,
        state: node.node_state,
        event: 'RETRY_REQUESTED',
      });
    }
    await deliverNodeEvent(client, node.id, { type: 'RETRY_REQUESTED' }, { actor, deps: deps.transitions });
    await deliver(deps, client, id, { type: 'NODE_RETRIED', by: actor, nodeKey }, actor);
    return { attempt_no: node.attempt_no };
  });
}
