import { z } from 'zod';
import { outcomeStates } from '../../machines/outcome.ts';
import { FatalMovementError } from '../errors.ts';
import { describeIssues, type ExecutionContext } from '../protocol.ts';

/**
 * The script a node's config gives the simulation lane under `sim`. Sequences are indexed by how
 * many calls of that kind the node already made (from the side-effect ledger, so the same script
 * plays the same way in any process and after a restart); the last entry repeats.
 */

const thrown = z.enum(['throw_temporary', 'throw_fatal']);

export const SimOutcomeSchema = z.union([
  z.enum(outcomeStates),
  thrown,
  z.object({
    next_state: z.enum(outcomeStates),
    provider_state: z.string().nullable().optional(),
    provider_refs: z.record(z.string(), z.unknown()).optional(),
    error_code: z.string().nullable().optional(),
    error_detail: z.string().nullable().optional(),
    retry_after_seconds: z.number().int().nonnegative().nullable().optional(),
    manual_intervention_required: z.boolean().optional(),
  }),
]);
export type SimOutcome = z.output<typeof SimOutcomeSchema>;

const sequence = z.array(SimOutcomeSchema);

export const SimScriptSchema = z.object({
  /** Delay before the call reaches the simulated provider (and is recorded in the ledger). */
  latency_ms: z.number().int().nonnegative().max(600_000).optional(),
  /** Delay after the provider recorded the call, before the answer arrives: the crash window. */
  ack_latency_ms: z.number().int().nonnegative().max(600_000).optional(),
  preflight: z.enum(['ok', 'FAILED', 'SKIPPED', 'throw_temporary', 'throw_fatal']).optional(),
  prepare: z.enum(['ok', 'none', 'throw_temporary', 'throw_fatal']).optional(),
  signing_required: z.boolean().optional(),
  pre_submit_check: z.enum(['ok', 'throw_temporary', 'throw_fatal']).optional(),
  submit: sequence.optional(),
  observe: sequence.optional(),
  recover: sequence.optional(),
  /** What inspect() (reconciliation's read-only question) answers; without it, the ledger decides. */
  inspect: sequence.optional(),
  /**
   * What cancel() (an operator's cancel of a submitted attempt) answers; without it, CANCELLED: the
   * simulated provider drops an attempt it has not completed. Any other answer leaves the node observed.
   */
  cancel: sequence.optional(),
  payload_format: z.enum(['json', 'eip712', 'evm_raw_tx']).optional(),
});
export type SimScript = z.output<typeof SimScriptSchema>;

/** The node's script; none means every call takes the lane's default. */
export function simScript(ctx: ExecutionContext): SimScript {
  const raw = ctx.node_config.sim ?? {};
  const parsed = SimScriptSchema.safeParse(raw);
  if (parsed.success) return parsed.data;
  throw new FatalMovementError('SIM_CONFIG_INVALID', `node ${ctx.node_key}: invalid sim script: ${describeIssues(parsed.error)}`);
}

/** The entry for the n-th call (0-based); undefined when the script has no sequence for it. */
export function pick(seq: readonly SimOutcome[] | undefined, n: number): SimOutcome | undefined {
  if (!seq || seq.length === 0) return undefined;
  return seq[Math.min(n, seq.length - 1)];
}
