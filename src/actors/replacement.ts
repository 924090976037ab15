import { InvalidTransitionError } from '../errors.ts';
import { isMovementError } from '../executors/errors.ts';
import type { PreparedAction } from '../executors/protocol.ts';
import { buildSignRequest } from '../executors/sign-request.ts';
import { evmReplacementsTotal } from '../metrics.ts';
import { insertArtifacts, type NewArtifact } from '../persistence/artifacts.ts';
import { withTransaction } from '../persistence/db.ts';
import { getNode, getMovement } from '../persistence/movements.ts';
import { contextFor, errorText, nowIso, type WorkerDeps } from './execution.ts';
import { deliverNodeEvent } from './transition.ts';

/**
 * Replacing a submitted action with a new version (an EVM fee bump: same nonce, higher fees). The
 * executor's observe() only proposes the version (unsigned, as the result's prepared_action); the
 * runtime, never the executor, has it signed with the dispatcher's sign request (buildSignRequest),
 * so the signer's policy (expected effect, fee cap) applies to it exactly as to the first version.
 * Then, in order:
 *
 * 1. sign, holding no lock (a KMS may be slow);
 * 2. one transaction: REPLACEMENT_SIGNED through the node machine (refused if the node moved on or
 *    another attempt began), and the version's prepared action and signature stored on the SAME
 *    attempt: durable before anything is sent;
 * 3. broadcast it through the executor's submit(), holding no lock. Its answer changes nothing:
 *    every version shares the nonce, so whichever the chain mines, observe() and recover() find
 *    it among the attempt's stored versions. A process dying between 2 and 3 leaves a stored
 *    version that was never sent, which is harmless; the next observation proposes another.
 */
export interface ReplacementProposal {
  nodeId: string;
  attemptNo: number;
  prepared: PreparedAction;
}

export type ReplacementOutcome = 'sent' | 'not_sent' | 'stale' | 'signing_failed';

/** Never throws: a failure leaves the pending version in place and is logged. */
export async function signAndSendReplacement(deps: WorkerDeps, proposal: ReplacementProposal): Promise<ReplacementOutcome> {
  let outcome: ReplacementOutcome;
  try {
    outcome = await replace(deps, proposal);
  } catch (err) {
    deps.log.warn({ node_id: proposal.nodeId, err: errorText(err) }, 'replacement abandoned');
    outcome = 'not_sent';
  }
  evmReplacementsTotal.inc({ result: outcome });
  return outcome;
}

async function replace(deps: WorkerDeps, proposal: ReplacementProposal): Promise<ReplacementOutcome> {
  const { nodeId, attemptNo, prepared } = proposal;
  const node = await getNode(deps.pool, nodeId);
  if (!node || node.attempt_no !== attemptNo || (node.node_state !== 'SUBMITTED' && node.node_state !== 'OBSERVING')) return 'stale';
  const request = (await getMovement(deps.pool, node.request_id))!;
  const log = deps.log.child({ request_id: node.request_id, node_id: node.id, node_key: node.node_key, worker: 'observer', attempt: attemptNo });
  const ctx = await contextFor(deps.pool, request, node, attemptNo);

  let signature;
  try {
    const signer = deps.signers.get(node.signer_binding as never);
    // The dispatcher's own builder: the expected effect from the approved plan (recipient, amount,
    // the chain's fee cap) binds every version exactly as it bound the first.
    signature = await signer.sign(buildSignRequest({ ctx, prepared, plan: request.compiled_plan, evm: deps.config.file.evm }));
  } catch (err) {
    // Nothing changes: the pending version stays, and a later observation proposes again.
    log.warn({ err: errorText(err), code: isMovementError(err) ? err.code : null }, 'replacement not signed');
    return 'signing_failed';
  }

  const artifacts: NewArtifact[] = [
    {
      request_id: node.request_id,
      request_node_id: node.id,
      attempt_no: attemptNo,
      artifact_type: 'prepared_action',
      artifact_digest: prepared.payload_hash,
      content_format: 'json',
      content_inline: JSON.stringify(prepared),
      content_uri: null,
      artifact_metadata: { action_type: prepared.action_type, signing_required: true, replacement: true },
    },
    {
      request_id: node.request_id,
      request_node_id: node.id,
      attempt_no: attemptNo,
      artifact_type: 'signature',
      artifact_digest: prepared.payload_hash,
      content_format: signature.signature_format,
      content_inline: signature.signature,
      content_uri: null,
      artifact_metadata: { signer_ref: signature.signer_ref, replacement: true },
    },
  ];
  try {
    await withTransaction(deps.pool, async (client) => {
      await deliverNodeEvent(
        client,
        node.id,
        { type: 'REPLACEMENT_SIGNED', attemptNo, payloadHash: prepared.payload_hash, at: nowIso() },
        { actor: 'worker:observer', deps: deps.transitions },
      );
      await insertArtifacts(client, artifacts);
    });
  } catch (err) {
    if (err instanceof InvalidTransitionError) return 'stale';
    throw err;
  }

  const executor = deps.executors.get(node.executor_binding as never);
  try {
    const sent = await executor.submit(ctx, prepared, { signResult: signature });
    log.info({ next_state: sent.next_state, error_code: sent.error_code, provider_refs: sent.provider_refs }, 'replacement broadcast');
    return sent.next_state === 'SUBMITTED' || sent.next_state === 'OBSERVING' || sent.next_state === 'COMPLETED' ? 'sent' : 'not_sent';
  } catch (err) {
    log.warn({ err: errorText(err) }, 'replacement broadcast failed; the stored version may be sent by a later look');
    return 'not_sent';
  }
}
