import { isHex, type Hex } from 'viem';
import { Agent, request } from 'undici';
import type { CctpConfig } from '../../config-file.ts';
import { fromBaseUnits } from '../evm/amounts.ts';
import type { EvmChains } from '../evm/chains.ts';
import { failed, manual, preparedWatch, result } from '../evm/tx-lifecycle.ts';
import type { ExecutionContext, ExecutionResult, Executor, PreparedAction } from '../protocol.ts';
import { CCTP_ATTESTATION_KEY, cctpOfChainId } from './common.ts';
import { attestationSigners, decodeMessage, type DecodedMessage } from './message.ts';
import { parseWatch as parseWatchOf, pinnedWatch } from '../watch.ts';

/** Circle blocks a client for 5 minutes after too many requests; without a Retry-After, wait that long. */
const RATE_LIMIT_DEFAULT_SECONDS = 300;
const TX_HASH = /^0x[0-9a-fA-F]{64}$/;

/** The watch prepare pins. */
interface Watch {
  source_domain: number;
  tx_hash: Hex;
  message_index: number;
}

/** One answer of the attestation service, classified. */
export type IrisAnswer =
  | { kind: 'ok'; body: unknown }
  | { kind: 'not_found' }
  | { kind: 'rate_limited'; retryAfter: number }
  | { kind: 'unavailable'; detail: string }
  | { kind: 'rejected'; status: number; detail: string };

/**
 * A client of Circle's attestation service (Iris v2): `GET /v2/messages/{sourceDomain}?transactionHash=`
 * and the fee quote `GET /v2/burn/USDC/fees/{sourceDomain}/{destinationDomain}`.
 * It never throws: every answer, and every failure to get one, is a value.
 */
export class IrisClient {
  readonly #base: string;
  readonly #timeoutMs: number;
  readonly #agent: Agent;

  constructor(cfg: Pick<CctpConfig, 'attestation_url' | 'timeout_ms'>) {
    this.#base = cfg.attestation_url.replace(/\/+$/, '');
    this.#timeoutMs = cfg.timeout_ms;
    this.#agent = new Agent({ connect: { timeout: cfg.timeout_ms } });
  }

  messages(sourceDomain: number, txHash: Hex): Promise<IrisAnswer> {
    return this.#get(`/v2/messages/${sourceDomain}?transactionHash=${txHash}`);
  }

  /** Circle's fee quote for a route: `[{finalityThreshold, minimumFee}]`, minimumFee in bps. */
  fees(sourceDomain: number, destinationDomain: number): Promise<IrisAnswer> {
    return this.#get(`/v2/burn/USDC/fees/${sourceDomain}/${destinationDomain}`);
  }

  async #get(path: string): Promise<IrisAnswer> {
    const url = `${this.#base}${path}`;
    try {
      const res = await request(url, { method: 'GET', headers: { accept: 'application/json' }, dispatcher: this.#agent, headersTimeout: this.#timeoutMs, bodyTimeout: this.#timeoutMs });
      const text = await res.body.text();
      const status = res.statusCode;
      if (status === 404) return { kind: 'not_found' };
      if (status === 429) return { kind: 'rate_limited', retryAfter: retryAfterSeconds(res.headers['retry-after']) ?? RATE_LIMIT_DEFAULT_SECONDS };
      if (status >= 500) return { kind: 'unavailable', detail: `the attestation service answered ${status}` };
      if (status < 200 || status >= 300) return { kind: 'rejected', status, detail: `the attestation service answered ${status}: ${text.slice(0, 200)}` };
      try {
        return { kind: 'ok', body: JSON.parse(text) };
      } catch {
        return { kind: 'unavailable', detail: `the attestation service answered ${status} with a body that is not JSON` };
      }
    } catch (err) {
      return { kind: 'unavailable', detail: `the attestation service did not answer: ${(err as Error).message}` };
    }
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }
}

function retryAfterSeconds(raw: string | string[] | undefined): number | null {
  const v = Array.isArray(raw) ? raw[0] : raw;
  if (v === undefined) return null;
  const n = Number(v);
  if (Number.isFinite(n) && n >= 0) return Math.ceil(n);
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/**
 * `exec.observe.cctp_attestation`: waits until Circle's attestation service has attested the burn's
 * message (pending -> complete), then completes with `message` and `attestation` (and the message's
 * nonce and domains) in provider_refs, for the mint to `$ref`. Never signs, never sends.
 */
export class CctpAttestationObserver implements Executor {
  readonly executorKey = CCTP_ATTESTATION_KEY;
  // Not in the cctp recovery arm: it has no side effect (observe lane, like the EVM observers).
  readonly lane = 'observe';
  readonly #iris: IrisClient;
  readonly #chains: EvmChains;
  readonly #pollSeconds: number;

  constructor(cfg: CctpConfig, chains: EvmChains) {
    this.#iris = new IrisClient(cfg);
    this.#chains = chains;
    this.#pollSeconds = cfg.poll_seconds;
  }

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const w = this.#watch(ctx);
    return w.ok ? null : failed(w.code, w.detail);
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const w = this.#watch(ctx);
    if (!w.ok) return failed(w.code, w.detail);
    return preparedWatch(ctx, 'cctp-attestation', JSON.stringify(w.value), { ...w.value });
  }

  async submit(_ctx: ExecutionContext, prepared: PreparedAction): Promise<ExecutionResult> {
    const w = parseWatch(prepared.payload);
    if (!w) return failed('CCTP_OBSERVE_SPEC_INVALID', 'the prepared watch cannot be read');
    return result({ next_state: 'SUBMITTED', provider_state: 'watching', provider_refs: { ...w }, retry_after_seconds: Math.round(this.#pollSeconds) });
  }

  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    const w = pinned(ctx);
    if (!w) return manual('CCTP_NO_PREPARED_ACTION', 'the attempt has no prepared attestation watch');
    const refs = { source_domain: w.source_domain, tx_hash: w.tx_hash };
    const answer = await this.#iris.messages(w.source_domain, w.tx_hash);
    const poll = Math.round(this.#pollSeconds);
    const waiting = (state: string, extra: Partial<ExecutionResult> = {}) =>
      result({ next_state: 'OBSERVING', provider_state: state, provider_refs: refs, retry_after_seconds: poll, ...extra });
    switch (answer.kind) {
      case 'not_found':
        return waiting('not_found');
      case 'rate_limited':
        return waiting('rate_limited', { error_code: 'CCTP_ATTESTATION_RATE_LIMITED', error_detail: `rate limited; asking again in ${answer.retryAfter} s`, retry_after_seconds: answer.retryAfter });
      case 'unavailable':
        return waiting('unavailable', { error_code: 'CCTP_ATTESTATION_UNAVAILABLE', error_detail: answer.detail });
      case 'rejected':
        return waiting('rejected', { error_code: 'CCTP_ATTESTATION_REJECTED', error_detail: answer.detail, retry_after_seconds: Math.max(poll, 60) });
    }
    const messages = (answer.body as { messages?: unknown } | null)?.messages;
    if (!Array.isArray(messages)) return waiting('unavailable', { error_code: 'CCTP_ATTESTATION_INVALID_RESPONSE', error_detail: 'the answer has no messages list' });
    // Found, but not processed yet.
    if (messages.length <= w.message_index) return waiting('not_processed');
    const item = messages[w.message_index] as Record<string, unknown>;
    const status = typeof item?.status === 'string' ? item.status : 'unknown';
    if (status !== 'complete' || typeof item.attestation !== 'string' || !isHex(item.attestation)) return waiting(status);
    const decoded = decodeMessage(item.message);
    if (!decoded) return failed('CCTP_MESSAGE_INVALID', 'the attested message is not a CCTP v2 message');
    if (decoded.sourceDomain !== w.source_domain) {
      return failed('CCTP_MESSAGE_MISMATCH', `the attested message comes from domain ${decoded.sourceDomain}, the burn was on domain ${w.source_domain}`);
    }
    const mismatch = againstBurn(ctx, decoded);
    if (mismatch) return failed('CCTP_MESSAGE_MISMATCH', mismatch);
    const signers = await attestationSigners(item.message as Hex, item.attestation);
    if (!signers) return failed('CCTP_ATTESTATION_INVALID', 'the attestation is not a list of 65-byte signatures over the message');
    return result({
      next_state: 'COMPLETED',
      provider_state: 'complete',
      provider_refs: {
        ...refs,
        message: item.message,
        attestation: item.attestation,
        nonce: decoded.nonce,
        destination_domain: decoded.destinationDomain,
        finality_threshold_executed: decoded.finalityThresholdExecuted,
        ...(decoded.burn ? burnRefs(decoded.burn, ctx.provider_context.decimals) : {}),
      },
      proof: {
        attestation_signers: signers,
        nonce: decoded.nonce,
        finality_threshold_executed: decoded.finalityThresholdExecuted,
        ...(decoded.burn ? { fee_executed_base_units: decoded.burn.feeExecuted.toString() } : {}),
      },
    });
  }

  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    if (!pinned(ctx)) return result({ next_state: 'READY', error_code: 'CCTP_NOTHING_SENT', error_detail: 'an attestation watch has no side effect' });
    return this.observe(ctx);
  }

  /** An attestation watch has no side effect: recover() only reads already. */
  inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.recover(ctx);
  }

  // No health(): Iris has no status endpoint, and a probe would count against its rate limit.

  async close(): Promise<void> {
    await this.#iris.close();
  }

  #watch(ctx: ExecutionContext): { ok: true; value: Watch } | { ok: false; code: string; detail: string } {
    const cfg = ctx.node_config;
    const hash = cfg.tx_hash ?? ctx.provider_context.tx_hash;
    if (typeof hash !== 'string' || !TX_HASH.test(hash)) return { ok: false, code: 'CCTP_INVALID_TX_HASH', detail: `tx_hash ${JSON.stringify(hash ?? null)} is not a transaction hash` };
    let domain = cfg.source_domain ?? ctx.provider_context.source_domain;
    if (domain === undefined && cfg.source_chain_id !== undefined) {
      const c = cctpOfChainId(this.#chains, cfg.source_chain_id, 'source_chain_id');
      if (!c.ok) return c;
      domain = c.value.domain;
    }
    if (typeof domain !== 'number' || !Number.isInteger(domain) || domain < 0) {
      return { ok: false, code: 'CCTP_INVALID_CONFIG', detail: 'the watch needs the source domain (source_domain, source_chain_id, or a preceding burn)' };
    }
    const index = cfg.message_index ?? 0;
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0) return { ok: false, code: 'CCTP_INVALID_CONFIG', detail: 'message_index must be a whole number' };
    return { ok: true, value: { source_domain: domain, tx_hash: hash.toLowerCase() as Hex, message_index: index } };
  }
}

/**
 * What the attested burn will mint: amount - feeExecuted to the recipient (the destination's
 * TokenMessengerV2 mints exactly that, and the fee to its feeRecipient). In token units too when
 * the burn reported its decimals, for the balance check to `$ref` (amount_received).
 */
function burnRefs(burn: NonNullable<DecodedMessage['burn']>, decimals: unknown): Record<string, unknown> {
  const received = burn.amount - burn.feeExecuted;
  const units = typeof decimals === 'number' && Number.isInteger(decimals) && decimals >= 0;
  return {
    mint_recipient: burn.mintRecipient,
    amount_base_units: burn.amount.toString(),
    max_fee_base_units: burn.maxFee.toString(),
    fee_executed_base_units: burn.feeExecuted.toString(),
    amount_received_base_units: received.toString(),
    ...(units ? { fee_executed: fromBaseUnits(burn.feeExecuted, decimals), amount_received: fromBaseUnits(received, decimals) } : {}),
  };
}

/** The attested message must be the burn the predecessor made (when it reported one). */
function againstBurn(ctx: ExecutionContext, m: NonNullable<ReturnType<typeof decodeMessage>>): string | null {
  const p = ctx.provider_context;
  if (!m.burn) return typeof p.amount_base_units === 'string' ? 'the attested message carries no burn' : null;
  if (typeof p.amount_base_units === 'string' && p.amount_base_units !== m.burn.amount.toString()) {
    return `the attested message burns ${m.burn.amount}, the burn was of ${p.amount_base_units}`;
  }
  if (typeof p.mint_recipient === 'string' && p.mint_recipient.toLowerCase() !== m.burn.mintRecipient) {
    return `the attested message mints to ${m.burn.mintRecipient}, the burn named ${p.mint_recipient}`;
  }
  if (typeof p.destination_domain === 'number' && p.destination_domain !== m.destinationDomain) {
    return `the attested message goes to domain ${m.destinationDomain}, the burn to ${p.destination_domain}`;
  }
  if (typeof p.max_fee_base_units === 'string' && p.max_fee_base_units !== m.burn.maxFee.toString()) {
    return `the attested message caps the fee at ${m.burn.maxFee}, the burn at ${p.max_fee_base_units}`;
  }
  // The destination would refuse it ("Fee exceeds max fee", "Fee equals or exceeds amount").
  if (m.burn.feeExecuted > m.burn.maxFee || (m.burn.feeExecuted > 0n && m.burn.feeExecuted >= m.burn.amount)) {
    return `the attested fee ${m.burn.feeExecuted} exceeds the burn's max fee ${m.burn.maxFee} or its amount ${m.burn.amount}`;
  }
  return null;
}

function parseWatch(payload: string | null): Watch | null {
  return parseWatchOf<Watch>(payload, (w) => typeof w.tx_hash === 'string' && typeof w.source_domain === 'number');
}

function pinned(ctx: ExecutionContext): Watch | null {
  return pinnedWatch(ctx, parseWatch);
}
