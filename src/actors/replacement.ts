import { parseTransaction, type Hex } from 'viem';
import { FatalMovementError, isMovementError } from '../executors/errors.ts';
import type { ExecutionContext, PreparedAction, ReplacedVersion, SignResult } from '../executors/protocol.ts';
import { buildSignRequest, signingRefusalAudit, effectConfigOf } from '../executors/sign-request.ts';
import { violation } from '../executors/signers/evm-policy.ts';
import { evmReplacementsTotal } from '../metrics.ts';
import { attemptVersions, signedVersionArtifacts } from '../executors/records.ts';
import { artifactsOfNodes, inlineArtifact, insertArtifacts, type ArtifactRow } from '../persistence/artifacts.ts';
import type { AuditEntry } from '../persistence/audit.ts';
import { writeAudit } from '../persistence/audit.ts';
import { withTransaction } from '../persistence/db.ts';
import { getNode, getMovement, type NodeRow } from '../persistence/movements.ts';
import { contextFor, errorText, nowIso, type WorkerDeps } from './execution.ts';
import { deliverBatch } from '../durable/transition.ts';

/**
 * Replacing a submitted action with a new version (an EVM fee bump: same nonce, higher fees). The
 * executor's observe() only proposes the version (unsigned, as the result's prepared_action); the
 * runtime, never the executor, has it signed, and only as a replacement of the attempt's ORIGINAL
 * version as Ferry's own records hold it (the prepared action whose signature the SUBMITTING commit
 * stored). The signer compares the two (evm-policy.ts checkReplacement): same chain, nonce,
 * recipient, value, calldata and gas, fees only raised, within a bounded factor and the chain's
 * cap. An observe()-proposed version is therefore never signed as an original: a hostile executor
 * that proposes the same transfer with another nonce (a second payment) is refused.
 *
 * Then, in order:
 *
 * 1. count the attempt's stored replacements; over FERRY_EVM_MAX_REPLACEMENTS the runtime refuses
 *    before asking the signer;
 * 2. sign, holding no lock (a KMS may be slow);
 * 3. one transaction: REPLACEMENT_SIGNED through the node machine (refused if the node moved on or
 *    another attempt began), the version's prepared action and signature stored on the SAME
 *    attempt and the `signer.replacement` audit row: durable before anything is sent;
 * 4. broadcast it through the executor's submit(), holding no lock. Its answer changes nothing:
 *    every version shares the nonce, so whichever the chain mines, observe() and recover() find
 *    it among the attempt's stored versions. A process dying between 3 and 4 leaves a stored
 *    version that was never sent, which is harmless; the next observation proposes another.
 *
 * A refusal (the runtime's limit or the signer's policy) sends nothing and changes nothing on the
 * node: the original may still be mined, so the node keeps observing. It is audited
 * (`signer.refused` with the rule) once per attempt and payload, with a `replacement_refused`
 * artifact on the attempt as the mark, so an executor proposing the same refused version at every
 * look does not fill the audit log.
 */
export interface ReplacementProposal {
  nodeId: string;
  attemptNo: number;
  prepared: PreparedAction;
}

export type ReplacementOutcome = 'sent' | 'not_sent' | 'stale' | 'signing_failed' | 'refused';

const ACTOR = 'worker:observer';

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
  const movement = (await getMovement(deps.pool, node.request_id))!;
  const log = deps.log.child({ movement_id: node.request_id, node_id: node.id, node_key: node.node_key, worker: 'observer', attempt: attemptNo });
  const ctx = await contextFor(deps.pool, movement, node, attemptNo);
  const versions = attemptVersions(await artifactsOfNodes(deps.pool, [node.id]), attemptNo);
  const replacementNo = versions.replacements + 1;
  const refuse = (err: FatalMovementError) => refused(deps, { node, ctx, prepared, replacementNo, refusedBefore: versions.refused, err, log });

  if (!versions.original || versions.original.payload === null) {
    return refuse(violation('replacement_original_missing', `attempt ${attemptNo} has no stored, signed original version: nothing to replace`));
  }
  if (replacementNo > deps.config.evmMaxReplacements) {
    return refuse(
      violation('replacement_limit', `replacement ${replacementNo} of attempt ${attemptNo} is over FERRY_EVM_MAX_REPLACEMENTS (${deps.config.evmMaxReplacements})`, {
        expected: deps.config.evmMaxReplacements,
        actual: replacementNo,
      }),
    );
  }
  if (prepared.payload_format !== versions.original.payload_format) {
    return refuse(violation('replacement_format', `a replacement is a ${versions.original.payload_format} like its original, not ${prepared.payload_format}`));
  }
  const replaces: ReplacedVersion = { payload: versions.original.payload, payload_hash: versions.original.payload_hash, replacement_no: replacementNo };

  let signature: SignResult;
  try {
    const signer = deps.signers.get(node.signer_binding as never);
    // The dispatcher's own builder: the expected effect from the approved plan (recipient, amount,
    // the chain's fee cap) binds every version exactly as it bound the first; `replaces` binds it
    // to the original.
    signature = await signer.sign(buildSignRequest({ ctx, prepared, plan: movement.compiled_plan, ...effectConfigOf(deps.config), replaces }));
  } catch (err) {
    if (err instanceof FatalMovementError) return refuse(err);
    // Nothing changes: the pending version stays, and a later observation proposes again.
    log.warn({ err: errorText(err), code: isMovementError(err) ? err.code : null }, 'replacement not signed');
    return 'signing_failed';
  }

  const artifacts = signedVersionArtifacts(node, attemptNo, prepared, signature);
  const audit: AuditEntry = {
    actor: ACTOR,
    action: 'signer.replacement',
    entity_type: 'movement_node',
    entity_id: node.id,
    details: {
      request_id: node.request_id,
      node_key: node.node_key,
      attempt_no: attemptNo,
      replacement_no: replacementNo,
      executor_key: ctx.resolved_bindings.executor.executor_key,
      signer_key: ctx.resolved_bindings.signer?.signer_key ?? null,
      signer_ref: signature.signer_ref,
      payload_hash: prepared.payload_hash,
      replaces_payload_hash: replaces.payload_hash,
      ...feesOf(prepared),
    },
  };
  const accepted = await withTransaction(deps.pool, async (client) => {
    const result = await deliverBatch(
      client,
      { nodes: [{ nodeId: node.id, event: { type: 'REPLACEMENT_SIGNED', attemptNo, payloadHash: prepared.payload_hash, at: nowIso() }, artifacts, audits: [audit], actor: ACTOR }] },
      { actor: ACTOR, deps: deps.transitions },
    );
    return !(result.nodes[0] instanceof Error);
  });
  if (!accepted) return 'stale';

  const executor = deps.executors.get(node.executor_binding as never);
  try {
    const sent = await executor.submit(ctx, prepared, { signResult: signature });
    log.info({ next_state: sent.next_state, error_code: sent.error_code, provider_refs: sent.provider_refs, replacement_no: replacementNo }, 'replacement broadcast');
    return sent.next_state === 'SUBMITTED' || sent.next_state === 'OBSERVING' || sent.next_state === 'COMPLETED' ? 'sent' : 'not_sent';
  } catch (err) {
    log.warn({ err: errorText(err) }, 'replacement broadcast failed; the stored version may be sent by a later look');
    return 'not_sent';
  }
}

/**
 * A refused replacement: nothing is stored as a version and nothing is sent; the node keeps
 * observing its original. The refusal is audited once per attempt and payload (and once per
 * attempt for the limit, which every later proposal would meet again).
 */
async function refused(
  deps: WorkerDeps,
  r: { node: NodeRow; ctx: ExecutionContext; prepared: PreparedAction; replacementNo: number; refusedBefore: ArtifactRow[]; err: FatalMovementError; log: WorkerDeps['log'] },
): Promise<ReplacementOutcome> {
  const rule = typeof r.err.details.rule === 'string' ? r.err.details.rule : null;
  r.log.warn({ code: r.err.code, rule, replacement_no: r.replacementNo, err: r.err.message }, 'replacement refused; the node keeps observing its original version');
  const seen = r.refusedBefore.some((a) => a.artifact_digest === r.prepared.payload_hash || (rule === 'replacement_limit' && a.artifact_metadata?.rule === rule));
  if (seen) return 'refused';
  await withTransaction(deps.pool, async (client) => {
    await insertArtifacts(client, [
      inlineArtifact(r.node, r.ctx.attempt_no, { type: 'replacement_refused', digest: r.prepared.payload_hash, format: 'json', content: null, metadata: { error_code: r.err.code, rule, replacement_no: r.replacementNo } }),
    ]);
    await writeAudit(
      client,
      signingRefusalAudit(r.ctx, r.err, r.err.code, { actor: ACTOR, details: { replacement_no: r.replacementNo, payload_hash: r.prepared.payload_hash } }),
    );
  });
  return 'refused';
}

/** The fee fields of a signed EVM replacement, decoded from its own bytes (for the audit row). */
function feesOf(prepared: PreparedAction): Record<string, string> {
  if (prepared.payload_format !== 'evm_raw_tx' || !prepared.payload) return {};
  try {
    const tx = parseTransaction(prepared.payload as Hex) as { maxFeePerGas?: bigint; maxPriorityFeePerGas?: bigint; gasPrice?: bigint };
    const out: Record<string, string> = {};
    if (tx.maxFeePerGas !== undefined) out.max_fee_per_gas = tx.maxFeePerGas.toString();
    if (tx.maxPriorityFeePerGas !== undefined) out.max_priority_fee_per_gas = tx.maxPriorityFeePerGas.toString();
    if (tx.gasPrice !== undefined) out.gas_price = tx.gasPrice.toString();
    return out;
  } catch {
    return {};
  }
}
