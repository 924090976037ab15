import { deliverBatch } from '../durable/transition.ts';
import type { FerryConfig } from '../config.ts';
import { FerryError, NotFoundError } from '../errors.ts';
import { FatalMovementError, isMovementError } from '../executors/errors.ts';
import { contextArtifactNodeIds, contextOfRows } from '../executors/context.ts';
import type { ExecutionContext, ExecutionResult, Executor, SignResult } from '../executors/protocol.ts';
import { attemptVersions, errorText, outcomeOf, resultArtifacts, signedVersionArtifacts } from '../executors/records.ts';
import type { ExecutorRegistry, SignerRegistry } from '../executors/registry.ts';
import { buildSignRequest, signingRefusalAudit, effectConfigOf } from '../executors/sign-request.ts';
import type { Logger } from '../log.ts';
import type { ExecutorOutcome, OutcomeState } from '../machines/outcome.ts';
import { artifactsOfNodes, type NewArtifact } from '../persistence/artifacts.ts';
import type { AuditEntry } from '../persistence/audit.ts';
import { withTransaction } from '../persistence/db.ts';
import { getMovement, isMovementId, lockMovement, nodesOfMovement, type MovementRow, type NodeRow } from '../persistence/movements.ts';
import { actorAliases } from '../persistence/principals.ts';
import { cancelMovement, type Movement, type MovementServiceDeps } from './movements.ts';

/**
 * An operator's cancel of a movement. With no node in flight the movement machine decides alone
 * (cancelMovement). With nodes whose attempt is with the provider (SUBMITTED, OBSERVING, in an
 * EXECUTING movement), their lanes are asked to cancel, and the machines settle on the answers:
 *
 * 1. under the movement lock: who may cancel, which nodes are in flight. A node between claim and
 *    provider (PREPARING, AWAITING_SIGNATURE, SUBMITTING) or UNKNOWN refuses the whole cancel
 *    (CANCEL_NODE_IN_DISPATCH): its attempt may be on its way, and nothing can be asked of it yet.
 *    When no such node's lane offers cancel(), CANCEL_NOT_SUPPORTED, and nothing changes;
 * 2. each lane's cancel(), holding no lock (the provider may be slow);
 * 3. a proposed replacement (EVM: the zero-value self-transfer at the attempt's nonce) is signed by
 *    the node's signer as a cancel of the attempt's original version, read from Ferry's own records:
 *    the signer allows that one shape and only with `cancels` set, which only this service sets;
 * 4. one transaction per node: CANCEL_ANSWERED through the node machine (the answer kept on the
 *    node, providerRefs.cancel, and in the transition log), the cancel's signed version stored on the
 *    attempt, and the `movement.cancel` audit row with the lane's answer. A confirmed cancel makes the
 *    node CANCELLED, and the movement CANCELLED once nothing else is in flight; any other answer
 *    leaves the node observed, and the movement goes on;
 * 5. only then the signed cancel is broadcast (through the executor's submit(), which clears the
 *    nonce for it), and what the chain's node said is recorded the same way.
 *
 * Never twice: the cancel and the payment share the attempt's nonce, so at most one is mined; the
 * observer settles the node on whichever it finds (the cancel: CANCELLED; the payment: COMPLETED as
 * usual), and after a cancel the payment is never fee-bumped again. A retry of the cancel asks the
 * lane again, which answers with the cancel already signed instead of signing another one.
 */

export interface CancelServiceDeps extends MovementServiceDeps {
  config: MovementServiceDeps['config'] & Pick<FerryConfig, 'file'> & Partial<Pick<FerryConfig, 'evmMaxFeePerGasCapWei'>>;
  executors: ExecutorRegistry;
  signers: SignerRegistry;
  log?: Logger;
}

/** One in-flight node's answer to an operator's cancel, as recorded. */
export interface CancelAnswer {
  node_key: string;
  attempt_no: number;
  /** CANCELLED: the provider confirmed; otherwise the state the attempt is in, the cancel pending or refused. */
  answer: string;
  provider_state: string | null;
  error_code: string | null;
  error_detail: string | null;
  /** False when the node had moved on before the answer could be recorded (it completed meanwhile). */
  recorded: boolean;
}

export interface CancelOutcome extends Movement {
  answers: CancelAnswer[];
}

const IN_DISPATCH = new Set(['PREPARING', 'AWAITING_SIGNATURE', 'SUBMITTING', 'UNKNOWN']);
const WITH_PROVIDER = new Set(['SUBMITTED', 'OBSERVING']);
const ANSWERS: readonly OutcomeState[] = ['CANCELLED', 'SUBMITTED', 'OBSERVING', 'COMPLETED', 'FAILED', 'UNKNOWN'];

export async function cancelMovementAtLanes(
  deps: CancelServiceDeps,
  id: string,
  input: { actor: string; reason?: string; scope: 'own' | 'any' },
): Promise<CancelOutcome> {
  if (!isMovementId(id)) throw new NotFoundError('movement', id);
  const plan = await withTransaction(deps.pool, async (client) => {
    const locked = await lockMovement(client, id);
    if (!locked) throw new NotFoundError('movement', id);
    if (input.scope === 'own' && !(await actorAliases(client, input.actor)).includes(locked.created_by)) {
      throw new FerryError('NOT_MOVEMENT_OWNER', `movement ${id} was created by someone else; only its creator or an operator can cancel it`, { entity_id: id });
    }
    const nodes = await nodesOfMovement(client, id);
    const withProvider = nodes.filter((n) => WITH_PROVIDER.has(n.node_state));
    // Only a running movement asks its lanes; in every other state the movement machine decides alone.
    if (locked.request_state !== 'EXECUTING') return null;
    const dispatching = nodes.filter((n) => IN_DISPATCH.has(n.node_state));
    if (dispatching.length > 0) {
      throw new FerryError(
        'CANCEL_NODE_IN_DISPATCH',
        `movement ${id} cannot be cancelled now: ${dispatching.map((n) => `node ${n.node_key} is ${n.node_state}`).join(', ')}; cancel again once it is SUBMITTED or settled (an UNKNOWN node is recovery's, or an operator's resolution)`,
        { entity_id: id, nodes: dispatching.map((n) => ({ node_key: n.node_key, node_state: n.node_state })) },
      );
    }
    if (withProvider.length === 0) return null;
    const lanes = withProvider.map((n) => ({ node: n, executor: deps.executors.get(n.executor_binding as never) as Executor }));
    const able = lanes.filter((l) => typeof l.executor.cancel === 'function');
    if (able.length === 0) {
      throw new FerryError(
        'CANCEL_NOT_SUPPORTED',
        `movement ${id} has nodes with their provider whose lanes cannot cancel: ${lanes.map((l) => `${l.node.node_key} (${l.executor.executorKey}, lane ${l.executor.lane})`).join(', ')}; they go on`,
        { entity_id: id, nodes: lanes.map((l) => ({ node_key: l.node.node_key, node_state: l.node.node_state, executor_key: l.executor.executorKey, lane: l.executor.lane })) },
      );
    }
    return { movement: locked, lanes: able };
  });
  if (!plan) {
    const moved = await cancelMovement(deps, id, input);
    return { ...moved, answers: [] };
  }

  const answers: CancelAnswer[] = [];
  for (const { node, executor } of plan.lanes) answers.push(await askToCancel(deps, plan.movement, node, executor, input));
  const movement = (await getMovement(deps.pool, id))!;
  const nodes = await nodesOfMovement(deps.pool, id);
  if (movement.request_state !== 'CANCELLED' && answers.every(refused)) {
    throw new FerryError(
      'CANCEL_REFUSED',
      `movement ${id} goes on: ${answers.map((a) => `node ${a.node_key}: ${a.error_code ?? a.answer}${a.error_detail ? ` (${a.error_detail})` : ''}`).join('; ')}`,
      { entity_id: id, answers },
    );
  }
  return { movement, nodes, answers };
}

/** Refused: not confirmed, and not pending at the provider either (a code says why). */
const refused = (a: CancelAnswer) => a.answer !== 'CANCELLED' && (a.error_code !== null || !a.recorded);

async function askToCancel(deps: CancelServiceDeps, movement: MovementRow, node: NodeRow, executor: Executor, input: { actor: string; reason?: string }): Promise<CancelAnswer> {
  const log = deps.log?.child({ movement_id: node.request_id, node_id: node.id, node_key: node.node_key, attempt: node.attempt_no, worker: 'cancel' });
  let ctx: ExecutionContext;
  let result: ExecutionResult;
  try {
    const rows = { movement, node, nodes: await nodesOfMovement(deps.pool, movement.id), attemptNo: node.attempt_no };
    ctx = contextOfRows(rows, await artifactsOfNodes(deps.pool, contextArtifactNodeIds(rows)));
    result = await executor.cancel!(ctx);
  } catch (err) {
    const code = isMovementError(err) ? err.code : 'CANCEL_ERROR';
    return record(deps, node, input, { nextState: stillObserved(node), errorCode: code, errorDetail: errorText(err) }, [], [], log);
  }
  const outcome = outcomeOf(result, ANSWERS, stillObserved(node));
  const own = resultArtifacts(node, node.attempt_no, result);
  const proposed = outcome.nextState !== 'CANCELLED' ? result.prepared_action : null;
  if (!proposed) return record(deps, node, input, outcome, own, [], log);

  // The lane proposes a replacement that cancels the attempt: signed by the node's signer as a cancel of the original.
  const versions = attemptVersions(await artifactsOfNodes(deps.pool, [node.id]), node.attempt_no);
  if (!versions.original?.payload) {
    return record(deps, node, input, { ...outcome, errorCode: 'CANCEL_ORIGINAL_MISSING', errorDetail: `attempt ${node.attempt_no} has no stored, signed original version to cancel` }, own, [], log);
  }
  let signature: SignResult;
  try {
    const signer = deps.signers.get(node.signer_binding as never);
    const cancels = { payload: versions.original.payload, payload_hash: versions.original.payload_hash, replacement_no: versions.replacements + 1 };
    signature = await signer.sign(buildSignRequest({ ctx, prepared: proposed, plan: movement.compiled_plan, ...effectConfigOf(deps.config), cancels }));
  } catch (err) {
    const code = isMovementError(err) ? err.code : 'CANCEL_NOT_SIGNED';
    const audits = err instanceof FatalMovementError ? [signingRefusalAudit(ctx, err, err.code, { actor: input.actor, details: { cancel: true, payload_hash: proposed.payload_hash } })] : [];
    return record(deps, node, input, { ...outcome, providerState: 'cancel_not_signed', errorCode: code, errorDetail: errorText(err) }, own, audits, log);
  }
  const stored = signedVersionArtifacts(node, node.attempt_no, proposed, signature, { cancel: true });
  const signed = await record(deps, node, input, { ...outcome, providerState: 'cancel_signed' }, [...own, ...stored], [], log, { cancel_payload_hash: proposed.payload_hash, signer_ref: signature.signer_ref });
  if (!signed.recorded) return signed;

  // Durable before it is sent: a process dying here leaves a stored cancel that the nonce reaper
  // sends (it re-broadcasts the attempt's newest stored version) or a later cancel finds.
  let sent: ExecutionResult;
  try {
    sent = await executor.submit(ctx, proposed, { signResult: signature });
  } catch (err) {
    return record(deps, node, input, { nextState: stillObserved(node), providerState: 'cancel_broadcast_uncertain', errorCode: isMovementError(err) ? err.code : 'CANCEL_BROADCAST_FAILED', errorDetail: errorText(err) }, [], [], log);
  }
  const accepted = sent.next_state === 'SUBMITTED' || sent.next_state === 'OBSERVING' || sent.next_state === 'COMPLETED';
  return record(
    deps,
    node,
    input,
    {
      nextState: stillObserved(node),
      providerState: accepted ? 'cancel_broadcast' : 'cancel_not_broadcast',
      providerRefs: { cancel_tx_hash: sent.provider_refs.tx_hash ?? null },
      errorCode: accepted ? null : sent.error_code ?? 'CANCEL_NOT_BROADCAST',
      errorDetail: accepted ? outcome.errorDetail ?? null : sent.error_detail,
    },
    [],
    [],
    log,
  );
}

/** The node's own state for an answer that settles nothing: it stays observed. */
const stillObserved = (node: NodeRow): OutcomeState => (node.node_state === 'OBSERVING' ? 'OBSERVING' : 'SUBMITTED');

async function record(
  deps: CancelServiceDeps,
  node: NodeRow,
  input: { actor: string; reason?: string },
  outcome: ExecutorOutcome,
  artifacts: NewArtifact[],
  audits: AuditEntry[],
  log: Logger | undefined,
  extra: Record<string, unknown> = {},
): Promise<CancelAnswer> {
  const at = new Date().toISOString();
  const answer: CancelAnswer = {
    node_key: node.node_key,
    attempt_no: node.attempt_no,
    answer: outcome.nextState,
    provider_state: outcome.providerState ?? null,
    error_code: outcome.errorCode ?? null,
    error_detail: outcome.errorDetail ?? null,
    recorded: false,
  };
  const audit: AuditEntry = {
    actor: input.actor,
    action: 'movement.cancel',
    entity_type: 'movement',
    entity_id: node.request_id,
    details: { reason: input.reason ?? null, node_key: node.node_key, attempt_no: node.attempt_no, answer: answer.answer, provider_state: answer.provider_state, error_code: answer.error_code, error_detail: answer.error_detail, provider_refs: outcome.providerRefs ?? {}, ...extra },
  };
  const result = await withTransaction(deps.pool, (client) =>
    deliverBatch(
      client,
      { nodes: [{ nodeId: node.id, event: { type: 'CANCEL_ANSWERED', outcome, attemptNo: node.attempt_no, by: input.actor, at }, artifacts, audits: [...audits, audit], actor: input.actor }] },
      { actor: input.actor, deps: deps.transitions },
    ),
  );
  answer.recorded = !(result.nodes[0] instanceof Error);
  log?.[answer.error_code ? 'warn' : 'info']({ answer: answer.answer, provider_state: answer.provider_state, error_code: answer.error_code, recorded: answer.recorded }, 'cancel answered');
  return answer;
}
