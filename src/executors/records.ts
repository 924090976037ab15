import { isOutcomeState, type ExecutorOutcome, type OutcomeState } from '../machines/outcome.ts';
import type { ArtifactRow, NewArtifact } from '../persistence/artifacts.ts';
import type { NodeRow } from '../persistence/movements.ts';
import { boundText, PreparedActionSchema, RESULT_BOUNDS, type ExecutionResult, type PreparedAction, type SignResult } from './protocol.ts';

/**
 * How the protocol's answers become Ferry's records, and what the records say back: an executor
 * result as the machine's outcome and as artifact rows, an error as a node's error text, and an
 * attempt's signed versions. Pure (no I/O): the workers and the services that call executors
 * (movement-cancel.ts) share them, and record what they return.
 */

/**
 * The machine's view of an executor result. A next_state the phase cannot take becomes
 * `fallback` with INVALID_EXECUTOR_RESULT: after a submit that is UNKNOWN, because money may
 * have moved and only the provider can tell.
 */
export function outcomeOf(result: ExecutionResult, allowed: readonly OutcomeState[], fallback: OutcomeState): ExecutorOutcome {
  const next = result.next_state;
  if (isOutcomeState(next) && allowed.includes(next)) {
    return {
      nextState: next,
      providerState: result.provider_state ?? null,
      providerRefs: result.provider_refs ?? {},
      providerRefId: providerRefIdOf(result),
      errorCode: result.error_code ?? null,
      errorDetail: result.error_detail ?? null,
      ...(result.manual_intervention_required ? { manualInterventionRequired: true } : {}),
    };
  }
  return {
    nextState: fallback,
    providerState: result.provider_state ?? null,
    providerRefs: result.provider_refs ?? {},
    providerRefId: providerRefIdOf(result),
    errorCode: 'INVALID_EXECUTOR_RESULT',
    errorDetail: `executor returned next_state ${JSON.stringify(next)}, not one of ${allowed.join(', ')}`,
  };
}

export function errorOutcome(state: OutcomeState, code: string, detail: string): ExecutorOutcome {
  return { nextState: state, errorCode: boundText(code, RESULT_BOUNDS.codeChars), errorDetail: boundText(detail, RESULT_BOUNDS.detailChars) };
}

function providerRefIdOf(result: ExecutionResult): string | null {
  const refs = result.provider_refs ?? {};
  const first = Object.values(refs).find((v) => typeof v === 'string');
  return (first as string | undefined) ?? null;
}

/** Proof and generated artifacts of a result, as rows for the artifacts table. */
export function resultArtifacts(node: NodeRow, attemptNo: number, result: ExecutionResult): NewArtifact[] {
  const out: NewArtifact[] = [];
  if (result.proof && Object.keys(result.proof).length > 0) {
    out.push({
      request_id: node.request_id,
      request_node_id: node.id,
      attempt_no: attemptNo,
      artifact_type: 'proof',
      artifact_digest: null,
      content_format: 'json',
      content_inline: JSON.stringify(result.proof),
      content_uri: null,
      artifact_metadata: {},
    });
  }
  for (const g of result.generated_artifacts ?? []) {
    out.push({
      request_id: node.request_id,
      request_node_id: node.id,
      attempt_no: attemptNo,
      artifact_type: g.artifact_type,
      artifact_digest: g.artifact_digest ?? null,
      content_format: g.content_format,
      content_inline: g.content_inline ?? null,
      content_uri: g.content_uri ?? null,
      artifact_metadata: g.artifact_metadata ?? {},
    });
  }
  return out;
}

/** An error's message as a node's error_detail: bounded as an executor's own error_detail is (RESULT_BOUNDS). */
export function errorText(err: unknown): string {
  return boundText(err instanceof Error ? err.message : String(err), RESULT_BOUNDS.detailChars);
}

/** What Ferry's records say about an attempt's versions. Pure. */
export function attemptVersions(artifacts: readonly ArtifactRow[], attemptNo: number): { original: PreparedAction | null; replacements: number; refused: ArtifactRow[] } {
  const own = artifacts.filter((a) => a.attempt_no === attemptNo);
  const isReplacement = (a: ArtifactRow) => a.artifact_metadata?.replacement === true;
  // The original is the version the SUBMITTING commit stored with its signature: an attempt may
  // hold earlier prepared actions that were never signed (a deferred or refused signing).
  const signed = own.find((a) => a.artifact_type === 'signature' && !isReplacement(a));
  const stored = signed ? own.find((a) => a.artifact_type === 'prepared_action' && !isReplacement(a) && a.artifact_digest === signed.artifact_digest) : undefined;
  let original: PreparedAction | null = null;
  if (stored?.content_inline) {
    try {
      const parsed = PreparedActionSchema.safeParse(JSON.parse(stored.content_inline));
      original = parsed.success ? parsed.data : null;
    } catch {
      original = null;
    }
  }
  return {
    original,
    replacements: own.filter((a) => a.artifact_type === 'signature' && isReplacement(a)).length,
    refused: own.filter((a) => a.artifact_type === 'replacement_refused'),
  };
}

/**
 * A signed later version of an attempt (a fee bump, or an operator's cancel with `cancel`), as the
 * two artifacts that store it: the prepared action and its signature, under the version's hash.
 */
export function signedVersionArtifacts(node: Pick<NodeRow, 'id' | 'request_id'>, attemptNo: number, prepared: PreparedAction, signature: SignResult, extra: { cancel?: true } = {}): NewArtifact[] {
  const digest = prepared.payload_hash;
  const of = (type: string, format: string, content: string, metadata: Record<string, unknown>): NewArtifact => ({
    request_id: node.request_id,
    request_node_id: node.id,
    attempt_no: attemptNo,
    artifact_type: type,
    artifact_digest: digest,
    content_format: format,
    content_inline: content,
    content_uri: null,
    artifact_metadata: metadata,
  });
  return [
    of('prepared_action', 'json', JSON.stringify(prepared), { action_type: prepared.action_type, signing_required: true, replacement: true, ...extra }),
    of('signature', signature.signature_format, signature.signature, { signer_ref: signature.signer_ref, replacement: true, ...extra }),
  ];
}
