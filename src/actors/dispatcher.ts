import { InvalidTransitionError } from '../errors.ts';
import { FatalMovementError, TemporaryMovementError, isMovementError } from '../executors/errors.ts';
import type { ExecutionContext, PreparedAction, SignResult } from '../executors/protocol.ts';
import { buildSignRequest, signingRefusalAudit } from '../executors/sign-request.ts';
import type { NodeEvent } from '../machines/node-machine.ts';
import { addSeconds } from '../machines/observe-policy.ts';
import { insertArtifacts, type NewArtifact } from '../persistence/artifacts.ts';
import { writeAudit, type AuditEntry } from '../persistence/audit.ts';
import { claimForDispatch, dispatchCandidates, type Claimed } from '../persistence/claims.ts';
import { claimsTotal } from '../metrics.ts';
import { claimInSavepoint, withTransaction } from '../persistence/db.ts';
import type { NodeRow } from '../persistence/movements.ts';
import { contextFor, errorOutcome, errorText, nowIso, outcomeOf, resultArtifacts, type RuntimeDeps } from './execution.ts';
import { deliverNodeEvent, deliverRequestEvent } from './transition.ts';

/**
 * The dispatcher: claims one READY node and drives it through preflight -> prepare -> (sign) ->
 * SUBMITTING -> submit, as the reference runtime does. Each step's outcome is one short
 * transaction through the node machine; no row lock is held while an executor or signer is
 * called. Serial per request: a request with a node in PREPARING, AWAITING_SIGNATURE or
 * SUBMITTING is not claimed again (see claims.ts), so different requests run in parallel while the
 * nodes of one request never race each other.
 */

const DEFER_SECONDS = 5;

interface Dispatch {
  claimed: Claimed;
  ctx: ExecutionContext | null;
  contextError: unknown;
}

/** Claims and runs one node. Returns false when there was nothing to dispatch. */
export async function dispatchOne(deps: RuntimeDeps): Promise<boolean> {
  const dispatch = await claim(deps);
  if (!dispatch) return false;
  try {
    await runPipeline(deps, dispatch);
  } catch (err) {
    // The node moved under the pipeline: recovery resolved an attempt whose submit outlived the
    // lane's SUBMITTING grace, or an operator acted. The machine refused the stale result; the
    // grace must exceed the executor's submit timeout for this never to happen.
    if (!(err instanceof InvalidTransitionError)) throw err;
    deps.log.warn({ node_id: dispatch.claimed.node.id, err: err.message }, 'dispatch result refused: the node moved on');
  }
  return true;
}

async function claim(deps: RuntimeDeps): Promise<Dispatch | null> {
  return withTransaction(deps.pool, async (client) => {
    const tried: string[] = [];
    for (let round = 0; round < 4; round++) {
      const candidates = await dispatchCandidates(client, 8, tried);
      if (candidates.length === 0) return null;
      for (const id of candidates) {
        const claimed = await claimInSavepoint(client, () => claimForDispatch(client, id));
        if (!claimed) {
          claimsTotal.inc({ worker: 'dispatcher', result: 'miss' });
          tried.push(id);
          continue;
        }
        claimsTotal.inc({ worker: 'dispatcher', result: 'hit' });
        const opts = { actor: 'worker:dispatcher', deps: deps.transitions };
        if (claimed.request.request_state === 'APPROVED') {
          await deliverRequestEvent(client, claimed.request.id, { type: 'DISPATCH_STARTED' }, opts);
        }
        const moved = await deliverNodeEvent(client, id, { type: 'DISPATCH_CLAIMED', at: nowIso() }, opts);
        const node = moved!.node;
        try {
          const ctx = await contextFor(client, claimed.request, node, node.attempt_no + 1);
          return { claimed: { ...claimed, node }, ctx, contextError: null };
        } catch (err) {
          return { claimed: { ...claimed, node }, ctx: null, contextError: err };
        }
      }
    }
    return null;
  });
}

async function step(deps: RuntimeDeps, node: NodeRow, event: NodeEvent, artifacts: NewArtifact[] = [], audit?: AuditEntry) {
  return withTransaction(deps.pool, async (client) => {
    await insertArtifacts(client, artifacts);
    const moved = await deliverNodeEvent(client, node.id, event, { actor: 'worker:dispatcher', deps: deps.transitions });
    if (audit) await writeAudit(client, audit);
    return moved;
  });
}

const failPreparing = (deps: RuntimeDeps, node: NodeRow, code: string, detail: string) =>
  step(deps, node, { type: 'PREPARE_FAILED', errorCode: code, errorDetail: detail });

/** A thrown temporary error before submit puts the node back to READY for a later attempt. */
function retryAt(err: unknown): string {
  const hinted = isMovementError(err) ? Number(err.details.retry_after_seconds) : NaN;
  return addSeconds(nowIso(), Number.isFinite(hinted) && hinted > 0 ? hinted : DEFER_SECONDS);
}

async function runPipeline(deps: RuntimeDeps, d: Dispatch): Promise<void> {
  let node = d.claimed.node;
  const log = deps.log.child({ request_id: node.request_id, node_id: node.id, node_key: node.node_key, worker: 'dispatcher' });
  if (!d.ctx) {
    const code = isMovementError(d.contextError) ? d.contextError.code : 'CONTEXT_BUILD_FAILED';
    await failPreparing(deps, node, code, errorText(d.contextError));
    return;
  }
  const ctx = d.ctx;
  const attempt = ctx.attempt_no;

  let executor;
  try {
    executor = deps.executors.get(node.executor_binding as never);
  } catch (err) {
    await failPreparing(deps, node, isMovementError(err) ? err.code : 'EXECUTOR_NOT_REGISTERED', errorText(err));
    return;
  }

  // Preflight and prepare: no side effect yet, so any failure is safe to report as such.
  let prepared: PreparedAction;
  try {
    const pre = await executor.preflight(ctx);
    if (pre) {
      const event: NodeEvent =
        pre.next_state === 'SKIPPED'
          ? { type: 'PREFLIGHT_SKIPPED', errorCode: pre.error_code ?? 'PREFLIGHT_SKIPPED', errorDetail: pre.error_detail ?? null }
          : { type: 'PREFLIGHT_FAILED', errorCode: pre.error_code ?? 'PREFLIGHT_FAILED', errorDetail: pre.error_detail ?? null };
      await step(deps, node, event);
      return;
    }
    const prep = await executor.prepare(ctx);
    if (!prep.prepared_action) {
      await failPreparing(deps, node, prep.error_code ?? 'PREPARE_RETURNED_NO_ACTION', prep.error_detail ?? 'prepare() returned no prepared_action');
      return;
    }
    prepared = prep.prepared_action;
  } catch (err) {
    if (err instanceof TemporaryMovementError) {
      await step(deps, node, { type: 'DISPATCH_DEFERRED', errorCode: err.code, errorDetail: err.message, retryAt: retryAt(err) });
    } else {
      await failPreparing(deps, node, isMovementError(err) ? err.code : 'PREPARE_ERROR', errorText(err));
    }
    return;
  }

  const preparedArtifact: NewArtifact = {
    request_id: node.request_id,
    request_node_id: node.id,
    attempt_no: attempt,
    artifact_type: 'prepared_action',
    artifact_digest: prepared.payload_hash,
    content_format: 'json',
    content_inline: JSON.stringify(prepared),
    content_uri: null,
    artifact_metadata: { action_type: prepared.action_type, signing_required: prepared.signing_required },
  };
  // Without signing, this commit is the SUBMITTING one: attempt number and idempotency key are
  // durable before submit() is called.
  node = (await step(deps, node, { type: 'PREPARED', signingRequired: prepared.signing_required, at: nowIso() }, [preparedArtifact]))!.node;

  let signResult: SignResult | undefined;
  if (prepared.signing_required) {
    const signed = await sign(deps, node, ctx, prepared, d.claimed.request.compiled_plan);
    if (!signed) return;
    signResult = signed.result;
    node = signed.node;
  }

  if (executor.preSubmitCheck) {
    try {
      await executor.preSubmitCheck(ctx);
    } catch (err) {
      if (err instanceof TemporaryMovementError) {
        await step(deps, node, {
          type: 'PRE_SUBMIT_CHECK_DEFERRED',
          errorCode: 'PRE_SUBMIT_CHECK_TEMPORARY_ERROR',
          errorDetail: errorText(err),
          retryAt: retryAt(err),
        });
      } else {
        const code = err instanceof FatalMovementError ? 'PRE_SUBMIT_CHECK_FATAL_ERROR' : 'PRE_SUBMIT_CHECK_UNEXPECTED_ERROR';
        await step(deps, node, { type: 'PRE_SUBMIT_CHECK_FAILED', errorCode: code, errorDetail: errorText(err) });
      }
      return;
    }
  }

  log.debug({ attempt }, 'submitting');
  let outcome;
  let artifacts: NewArtifact[] = [];
  try {
    const result = await executor.submit(ctx, prepared, { signResult });
    outcome = outcomeOf(result, ['COMPLETED', 'SUBMITTED', 'OBSERVING', 'FAILED', 'UNKNOWN'], 'UNKNOWN');
    artifacts = resultArtifacts(node, attempt, result);
    if (outcome.nextState === 'SUBMITTED' || outcome.nextState === 'OBSERVING') {
      const at = nowIso();
      await step(deps, node, { type: 'SUBMIT_RESULT', outcome, at, nextObserveAt: result.retry_after_seconds ? addSeconds(at, result.retry_after_seconds) : null }, artifacts);
      return;
    }
  } catch (err) {
    // A fatal error is the provider's definite refusal; anything else (timeout, connection reset,
    // a bug) leaves us unable to tell whether money moved: UNKNOWN, for recovery to resolve.
    outcome =
      err instanceof FatalMovementError
        ? errorOutcome('FAILED', err.code, err.message)
        : errorOutcome('UNKNOWN', isMovementError(err) ? err.code : 'SUBMIT_ERROR', errorText(err));
  }
  await step(deps, node, { type: 'SUBMIT_RESULT', outcome, at: nowIso(), nextObserveAt: null }, artifacts);
}

async function sign(
  deps: RuntimeDeps,
  node: NodeRow,
  ctx: ExecutionContext,
  prepared: PreparedAction,
  plan: unknown,
): Promise<{ result: SignResult; node: NodeRow } | null> {
  if (!node.signer_binding) {
    await step(deps, node, { type: 'SIGNING_FAILED', errorCode: 'MISSING_SIGNER_BINDING', errorDetail: 'missing signer binding' });
    return null;
  }
  try {
    const signer = deps.signers.get(node.signer_binding as never);
    const request = buildSignRequest({ ctx, prepared, plan, evm: deps.config.file.evm });
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
    const moved = await step(deps, node, { type: 'SIGNED', at: nowIso() }, [artifact]);
    return { result, node: moved!.node };
  } catch (err) {
    if (err instanceof TemporaryMovementError) {
      await step(deps, node, { type: 'DISPATCH_DEFERRED', errorCode: err.code, errorDetail: err.message, retryAt: retryAt(err) });
    } else {
      const code = isMovementError(err) ? err.code : 'SIGNING_ERROR';
      await step(deps, node, { type: 'SIGNING_FAILED', errorCode: code, errorDetail: errorText(err) }, [], signingRefusalAudit(ctx, err, code));
    }
    return null;
  }
}
