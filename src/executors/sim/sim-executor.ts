import { setTimeout as sleep } from 'node:timers/promises';
import { isAddress, serializeTransaction, toHex, type Address } from 'viem';
import type { Pool } from '../../persistence/db.ts';
import { submitsFor, type SimCall } from '../../persistence/sim-ledger.ts';
import { attemptKey } from '../../ids.ts';
import { LedgerBatcher } from './ledger-batcher.ts';
import { FatalMovementError, TemporaryMovementError } from '../errors.ts';
import { ownDatabase } from '../infra.ts';
import { payloadHash } from '../payload-hash.ts';
import {
  ExecutionResultSchema,
  type ExecutionContext,
  type ExecutionResult,
  type ExecutionResultInput,
  type Executor,
  type PreparedAction,
  type SubmitOptions,
} from '../protocol.ts';
import { pick, simScript, type SimOutcome, type SimScript } from './script.ts';

export const SIM_LANE = 'sim';
export const SIM_ACTION_KEY = 'exec.sim.action';
export const SIM_OBSERVE_KEY = 'exec.sim.observe';

// Where simulated transactions would go: never broadcast, but a real, well-formed EVM transaction.
const SINK_ADDRESS: Address = '0x000000000000000000000000000000000000dEaD';

/**
 * A simulated provider whose behaviour the node's config scripts (see script.ts). Every call is
 * written to the side-effect ledger before it answers, so "did the submit happen?" has a durable
 * answer even when the process dies right after it: exactly what recover() consults.
 */
export class SimExecutor implements Executor {
  readonly lane = SIM_LANE;
  readonly #ledger: LedgerBatcher;

  constructor(
    readonly executorKey: string,
    /** action: submit completes at once; observe: submit reports SUBMITTED and the observer polls. */
    private readonly style: 'action' | 'observe',
    private readonly pool: Pool,
    ledger?: LedgerBatcher,
  ) {
    this.#ledger = ledger ?? new LedgerBatcher(pool);
  }

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const script = await this.#unrecorded(ctx);
    switch (script.preflight ?? 'ok') {
      case 'ok':
        return null;
      case 'FAILED':
        return result({ next_state: 'FAILED', error_code: 'SIM_PREFLIGHT_REFUSED', error_detail: 'scripted preflight refusal' });
      case 'SKIPPED':
        return result({ next_state: 'SKIPPED', error_detail: 'scripted preflight skip' });
      case 'throw_temporary':
        throw temporary('preflight');
      case 'throw_fatal':
        throw fatal('preflight');
    }
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const script = await this.#unrecorded(ctx);
    switch (script.prepare ?? 'ok') {
      case 'none':
        return result({ next_state: 'FAILED', error_code: 'SIM_NOTHING_PREPARED', error_detail: 'scripted prepare without an action' });
      case 'throw_temporary':
        throw temporary('prepare');
      case 'throw_fatal':
        throw fatal('prepare');
    }
    const signing = script.signing_required ?? false;
    return result({
      next_state: signing ? 'AWAITING_SIGNATURE' : 'SUBMITTING',
      prepared_action: preparedAction(ctx, script, signing),
    });
  }

  async preSubmitCheck(ctx: ExecutionContext): Promise<void> {
    const verdict = simScript(ctx).pre_submit_check ?? 'ok';
    if (verdict === 'throw_temporary') throw temporary('pre_submit_check');
    if (verdict === 'throw_fatal') throw fatal('pre_submit_check');
  }

  async submit(ctx: ExecutionContext, prepared: PreparedAction, opts: SubmitOptions = {}): Promise<ExecutionResult> {
    // Refused before anything is recorded: an unsigned request never reaches the provider.
    if (prepared.signing_required && !opts.signResult) {
      throw new FatalMovementError('SIM_SIGNATURE_MISSING', `node ${ctx.node_key}: the prepared action needs a signature and none was given`);
    }
    const { script, n } = await this.#call(ctx, 'submit');
    const outcome = pick(script.submit, n) ?? (this.style === 'action' ? 'COMPLETED' : 'SUBMITTED');
    const extraRefs = opts.signResult ? { sim_signer_ref: opts.signResult.signer_ref } : {};
    return outcomeResult(outcome, ctx, 'submit', extraRefs);
  }

  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    const { script, n } = await this.#call(ctx, 'observe');
    return outcomeResult(pick(script.observe, n) ?? 'COMPLETED', ctx, 'observe');
  }

  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    const { script, n } = await this.#call(ctx, 'recover');
    const scripted = pick(script.recover, n);
    if (scripted !== undefined) return outcomeResult(scripted, ctx, 'recover');
    // As a provider lookup by idempotency key would: the attempt went out, or it never arrived.
    // The simulated provider's ledger is authoritative, so "never arrived" is proof, and READY
    // lets the node try again under a new attempt (a real lane needs the same certainty to do so).
    const submits = await ownDatabase('recover', () => submitsFor(this.pool, attemptKeyOf(ctx)));
    if (submits.length > 0) return outcomeResult('COMPLETED', ctx, 'recover');
    return outcomeResult(
      { next_state: 'READY', error_code: 'RECOVERY_NO_SUBMISSION', error_detail: 'the provider has no record of this attempt' },
      ctx,
      'recover',
    );
  }

  /** As recover() answers, from its own script (`inspect`) or the ledger; recorded as an `inspect` call. */
  async inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    const { script, n } = await this.#call(ctx, 'inspect');
    const scripted = pick(script.inspect, n);
    if (scripted !== undefined) return outcomeResult(scripted, ctx, 'inspect');
    const submits = await ownDatabase('inspect', () => submitsFor(this.pool, attemptKeyOf(ctx)));
    if (submits.length > 0) return outcomeResult('COMPLETED', ctx, 'inspect');
    return outcomeResult({ next_state: 'READY', error_code: 'RECOVERY_NO_SUBMISSION', error_detail: 'the provider has no record of this attempt' }, ctx, 'inspect');
  }

  /**
   * An operator's cancel of a submitted attempt, recorded in the ledger like every call: the
   * scripted answer, else CANCELLED (the simulated provider holds an attempt it has not completed
   * and drops it on request; nothing was paid).
   */
  async cancel(ctx: ExecutionContext): Promise<ExecutionResult> {
    const { script, n } = await this.#call(ctx, 'cancel');
    return outcomeResult(pick(script.cancel, n) ?? 'CANCELLED', ctx, 'cancel');
  }

  async health(): Promise<Record<string, unknown>> {
    return { ok: true, executor_key: this.executorKey, lane: SIM_LANE };
  }

  /**
   * preflight() and prepare() only read, at a real provider as here: nothing of theirs is recorded,
   * so the ledger holds what reached the provider (submit, observe, recover, inspect, cancel) and a
   * movement's critical path carries no statement for them. Their scripted latency still applies.
   */
  async #unrecorded(ctx: ExecutionContext): Promise<SimScript> {
    const script = simScript(ctx);
    if (script.latency_ms) await sleep(script.latency_ms);
    if (script.ack_latency_ms) await sleep(script.ack_latency_ms);
    return script;
  }

  async #call(ctx: ExecutionContext, call: SimCall): Promise<{ script: SimScript; n: number }> {
    const script = simScript(ctx);
    if (script.latency_ms) await sleep(script.latency_ms);
    // The ledger is Ferry's own database: its trouble is not the provider's answer (see infra.ts).
    const { priorCalls } = await ownDatabase(call, () =>
      this.#ledger.record({
        request_node_id: ctx.request_node_id,
        attempt_no: ctx.attempt_no,
        idempotency_key: attemptKeyOf(ctx),
        executor_key: this.executorKey,
        call,
      }),
    );
    if (script.ack_latency_ms) await sleep(script.ack_latency_ms);
    return { script, n: priorCalls };
  }
}

function attemptKeyOf(ctx: ExecutionContext): string {
  return ctx.idempotency_key ?? attemptKey(ctx.request_node_id, ctx.attempt_no);
}

function result(input: ExecutionResultInput): ExecutionResult {
  return ExecutionResultSchema.parse(input);
}

function temporary(call: string): TemporaryMovementError {
  return new TemporaryMovementError('SIM_TEMPORARY_ERROR', `scripted temporary error in ${call}`);
}

function fatal(call: string): FatalMovementError {
  return new FatalMovementError('SIM_FATAL_ERROR', `scripted fatal error in ${call}`);
}

const defaultErrorCode: Partial<Record<string, string>> = { FAILED: 'SIM_FAILED', UNKNOWN: 'SIM_OUTCOME_UNKNOWN' };

function outcomeResult(outcome: SimOutcome, ctx: ExecutionContext, call: string, extraRefs: Record<string, unknown> = {}): ExecutionResult {
  if (outcome === 'throw_temporary') throw temporary(call);
  if (outcome === 'throw_fatal') throw fatal(call);
  const o = typeof outcome === 'string' ? { next_state: outcome } : outcome;
  return result({
    next_state: o.next_state,
    provider_state: 'provider_state' in o && o.provider_state !== undefined ? o.provider_state : `SIM_${o.next_state}`,
    provider_refs: { sim_ref: `sim-${attemptKeyOf(ctx)}`, ...extraRefs, ...('provider_refs' in o ? o.provider_refs : {}) },
    error_code: ('error_code' in o ? o.error_code : undefined) ?? defaultErrorCode[o.next_state] ?? null,
    error_detail: ('error_detail' in o ? o.error_detail : undefined) ?? null,
    retry_after_seconds: ('retry_after_seconds' in o ? o.retry_after_seconds : undefined) ?? null,
    manual_intervention_required: ('manual_intervention_required' in o ? o.manual_intervention_required : undefined) ?? false,
  });
}

function preparedAction(ctx: ExecutionContext, script: SimScript, signingRequired: boolean) {
  const format = script.payload_format ?? 'json';
  const key = attemptKeyOf(ctx);
  const payload = simPayload(format, ctx, key);
  return {
    prepared_action_id: `sim-pa-${key}`,
    action_type: ctx.action_type,
    payload_format: format,
    payload,
    payload_hash: payloadHash(payload),
    signing_required: signingRequired,
    provider_hints: { lane: SIM_LANE },
  };
}

function simPayload(format: 'json' | 'eip712' | 'evm_raw_tx', ctx: ExecutionContext, key: string): string {
  const amount = String(ctx.intent.amount ?? ctx.input_params.amount ?? '0');
  const asset = String(ctx.intent.asset ?? '');
  const chainId = Number(ctx.input_params.chain_id ?? 1);
  switch (format) {
    case 'json':
      return JSON.stringify({
        lane: SIM_LANE,
        request_id: ctx.request_id,
        request_node_id: ctx.request_node_id,
        node_key: ctx.node_key,
        attempt_no: ctx.attempt_no,
        idempotency_key: key,
        action_type: ctx.action_type,
        asset,
        amount,
      });
    case 'eip712':
      return JSON.stringify({
        domain: { name: 'Ferry Sim', version: '1', chainId },
        types: {
          SimMovement: [
            { name: 'idempotencyKey', type: 'string' },
            { name: 'asset', type: 'string' },
            { name: 'amount', type: 'string' },
          ],
        },
        primaryType: 'SimMovement',
        message: { idempotencyKey: key, asset, amount },
      });
    case 'evm_raw_tx':
      return serializeTransaction({
        type: 'eip1559',
        chainId,
        nonce: ctx.attempt_no,
        to: destinationAddress(ctx) ?? SINK_ADDRESS,
        value: 0n,
        gas: 50_000n,
        maxFeePerGas: 1n,
        maxPriorityFeePerGas: 1n,
        data: toHex(key),
      });
  }
}

function destinationAddress(ctx: ExecutionContext): Address | null {
  const dest = ctx.intent.destination;
  const candidate = typeof dest === 'object' && dest !== null ? (dest as Record<string, unknown>).address : dest;
  return typeof candidate === 'string' && isAddress(candidate, { strict: false }) ? (candidate as Address) : null;
}
