import { keccak256, toHex, type Address, type Hex } from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import { attemptKey } from '../../ids.ts';
import { fromBaseUnits } from '../evm/amounts.ts';
import type { EvmChain } from '../evm/chains.ts';
import { errorDetail } from '../evm/rpc-errors.ts';
import { failed, manual, result } from '../evm/tx-lifecycle.ts';
import { NothingSentError, TemporaryMovementError } from '../errors.ts';
import { payloadHash } from '../payload-hash.ts';
import type { ExecutionContext, ExecutionResult, Executor, PreparedAction, SubmitOptions } from '../protocol.ts';
import type { GatewayApiClient } from './api.ts';
import { burnIntentTypedData, decodeAttestation, gatewayWalletAbi, parseBurnIntentMessage, transferSpecHash, word, type BurnIntent } from './codec.ts';
import { GATEWAY_INTENT_KEY, GATEWAY_LANE } from './common.ts';
import type { GatewayConfig } from './config.ts';
import { gatewayBurnSpecOf, type GatewayBurnSpec, type Parsed } from './spec.ts';

export interface GatewayIntentOptions {
  chain: EvmChain;
  from: Address;
  tokens: readonly EvmTokenConfig[];
  gateway: GatewayConfig;
  api: GatewayApiClient;
}

/** The typed data a prepared action carries, and the burn intent in it. */
interface Prepared {
  payload: string;
  intent: BurnIntent;
  specHash: Hex;
}

/**
 * `exec.gateway.intent`: a Circle Gateway burn intent from one hot wallet's unified balance to a
 * recipient on another domain (docs/gateway-lane.md). prepare builds the EIP-712 BurnIntent
 * (domain GatewayWallet / 1) with its TransferSpec fixed by the plan, a salt derived from the
 * attempt key (so the transfer spec hash, Gateway's replay key, is the attempt's own) and a
 * maxBlockHeight `intent_validity_blocks` past the source chain's head; the signer checks it field
 * by field against the approved effect and signs it. submit posts it to `/v1/transfer` and
 * completes with the attestation and its signature (for the mint), the transfer id and the fees.
 *
 * Recovery posts the very same signed intent again (never a new one: the same salt, so the same
 * spec hash), which Gateway answers with the transfer it made, or refuses as a duplicate (then a
 * person fetches the attestation: the source wallet's GatewayBurned under the spec hash says
 * whether the balance was spent). An attempt without a stored signature never reached Gateway.
 */
export class GatewayIntentExecutor implements Executor {
  readonly executorKey = GATEWAY_INTENT_KEY;
  readonly lane = GATEWAY_LANE;
  readonly chain: EvmChain;
  readonly from: Address;
  readonly #tokens: readonly EvmTokenConfig[];
  readonly #gateway: GatewayConfig;
  readonly #api: GatewayApiClient;

  constructor(opts: GatewayIntentOptions) {
    this.chain = opts.chain;
    this.from = opts.from.toLowerCase() as Address;
    this.#tokens = opts.tokens;
    this.#gateway = opts.gateway;
    this.#api = opts.api;
  }

  #spec(ctx: ExecutionContext): Parsed<GatewayBurnSpec> {
    return gatewayBurnSpecOf(this.#gateway, this.chain.chainId, this.#tokens, ctx.node_config, ctx.intent);
  }

  async #read<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw new TemporaryMovementError('GATEWAY_RPC_UNAVAILABLE', `${this.chain.label} did not answer ${what}: ${errorDetail(err)}`);
    }
  }

  /** The spec resolves, the chain is the one configured, and the wallet's available balance covers the value (the fee is Gateway's to add). */
  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const s = this.#spec(ctx);
    if (!s.ok) return failed(s.code, s.detail);
    const chainId = await this.#read('eth_chainId', () => this.chain.client.getChainId());
    if (chainId !== this.chain.chainId) return failed('EVM_CHAIN_MISMATCH', `${this.chain.label}: the RPC serves chain ${chainId}`);
    const v = s.value;
    const available = await this.#read('availableBalance', () =>
      this.chain.client.readContract({ address: v.source.wallet as Address, abi: gatewayWalletAbi, functionName: 'availableBalance', args: [v.sourceToken.address, this.from] }),
    );
    if (available < v.value) {
      return failed('GATEWAY_INSUFFICIENT_BALANCE', `${this.from} has ${fromBaseUnits(available, v.sourceToken.decimals)} ${v.sourceToken.symbol} available in the GatewayWallet on ${this.chain.label}, the transfer needs ${v.amountText} plus the fee (deposit first)`);
    }
    return null;
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const s = this.#spec(ctx);
    if (!s.ok) return failed(s.code, s.detail);
    const v = s.value;
    const head = await this.#read('eth_blockNumber', () => this.chain.client.getBlockNumber());
    const key = ctx.idempotency_key ?? attemptKey(ctx.request_node_id, ctx.attempt_no);
    const intent: BurnIntent = {
      maxBlockHeight: head + BigInt(this.#gateway.intent_validity_blocks),
      maxFee: v.maxFee,
      spec: {
        version: 1,
        sourceDomain: v.source.domain,
        destinationDomain: v.destination.domain,
        sourceContract: word(v.source.wallet as Address),
        destinationContract: word(v.destination.minter as Address),
        sourceToken: word(v.sourceToken.address),
        destinationToken: word(v.destinationToken.address),
        sourceDepositor: word(this.from),
        destinationRecipient: word(v.recipient),
        sourceSigner: word(this.from),
        destinationCaller: word(v.destinationCaller),
        value: v.value,
        // The attempt's own: a retry of the attempt is the same transfer, a new attempt a new one.
        salt: keccak256(toHex(`ferry:gateway:burn_intent:${key}`)),
        hookData: '0x',
      },
    };
    const payload = JSON.stringify(burnIntentTypedData(intent));
    const specHash = transferSpecHash(intent.spec);
    return result({
      next_state: 'AWAITING_SIGNATURE',
      prepared_action: {
        prepared_action_id: `gateway-${key}`,
        action_type: ctx.action_type,
        payload_format: 'eip712',
        payload,
        payload_hash: payloadHash(payload),
        signing_required: true,
        provider_hints: {
          source_chain_id: this.chain.chainId,
          destination_chain_id: v.destination.chain_id,
          source_domain: v.source.domain,
          destination_domain: v.destination.domain,
          depositor: this.from,
          recipient: v.recipient,
          amount: v.amountText,
          amount_base_units: v.value.toString(),
          max_fee_base_units: v.maxFee.toString(),
          max_block_height: intent.maxBlockHeight.toString(),
          transfer_spec_hash: specHash,
        },
      },
    });
  }

  async submit(ctx: ExecutionContext, prepared: PreparedAction, opts: SubmitOptions): Promise<ExecutionResult> {
    const p = preparedOf(prepared.payload);
    if (!p) return failed('GATEWAY_NO_PREPARED_ACTION', 'the prepared burn intent cannot be read');
    const signature = opts.signResult?.signature;
    if (!signature || !/^0x[0-9a-fA-F]{130}$/.test(signature)) return failed('GATEWAY_SIGNATURE_MISSING', 'the burn intent has no 65-byte signature');
    return this.#post(ctx, p, signature, false);
  }

  /** Posts the signed intent; `again`: recovery's post of the attempt's stored intent. */
  async #post(ctx: ExecutionContext, p: Prepared, signature: string, again: boolean): Promise<ExecutionResult> {
    const message = (JSON.parse(p.payload) as { message: Record<string, unknown> }).message;
    const answer = await this.#api.transfer(message, signature);
    const refs = this.#refs(ctx, p);
    if (answer.kind === 'unavailable') {
      // Never reached Gateway: nothing of the attempt left Ferry, a new attempt may go.
      if (!answer.delivered && !again) throw new NothingSentError('GATEWAY_API_UNREACHABLE', `${answer.detail}; nothing was sent`);
      throw new TemporaryMovementError('GATEWAY_API_UNAVAILABLE', `${answer.detail}; whether the transfer was made is not known (the signed intent is kept, and asked about again)`);
    }
    if (answer.kind === 'refused') {
      if (answer.status === 409 || /duplicate/i.test(answer.message)) {
        return result({
          next_state: 'UNKNOWN',
          provider_state: 'duplicate',
          provider_refs: refs,
          error_code: 'GATEWAY_TRANSFER_DUPLICATE',
          error_detail: `Gateway refuses the intent as a duplicate of transfer spec ${p.specHash} (${answer.message}): a transfer was made for it; its attestation must be fetched from Gateway (the source wallet's GatewayBurned under the spec hash shows the burn)`,
          manual_intervention_required: true,
        });
      }
      return result({ next_state: 'FAILED', provider_state: 'refused', provider_refs: refs, error_code: refusalCode(answer.message), error_detail: `Gateway refused the burn intent (${answer.status}): ${answer.message}` });
    }
    return this.#attested(p, answer.body, refs);
  }

  /** The API's answer checked against what was signed: the attestation is of this very spec. */
  #attested(p: Prepared, body: unknown, refs: Record<string, unknown>): ExecutionResult {
    const b = (body ?? {}) as { transferId?: unknown; attestation?: unknown; signature?: unknown; fees?: { total?: unknown }; expirationBlock?: unknown };
    const decoded = decodeAttestation(b.attestation);
    if (!decoded || typeof b.signature !== 'string' || !/^0x[0-9a-fA-F]{130}$/.test(b.signature)) {
      return result({ next_state: 'UNKNOWN', provider_state: 'answer_invalid', provider_refs: refs, error_code: 'GATEWAY_ANSWER_INVALID', error_detail: 'Gateway answered the transfer without a readable attestation and signature', manual_intervention_required: true });
    }
    if (decoded.specHash !== p.specHash) {
      return result({
        next_state: 'UNKNOWN',
        provider_state: 'attestation_mismatch',
        provider_refs: { ...refs, attested_spec_hash: decoded.specHash },
        error_code: 'GATEWAY_ATTESTATION_MISMATCH',
        error_detail: `Gateway attested transfer spec ${decoded.specHash}, the signed intent is ${p.specHash}`,
        manual_intervention_required: true,
      });
    }
    return result({
      next_state: 'COMPLETED',
      provider_state: 'attested',
      provider_refs: {
        ...refs,
        transfer_id: typeof b.transferId === 'string' ? b.transferId.slice(0, 100) : null,
        attestation: (b.attestation as string).toLowerCase(),
        attestation_signature: b.signature.toLowerCase(),
        attestation_expiration_block: decoded.maxBlockHeight.toString(),
        fee_total_base_units: typeof b.fees?.total === 'string' && /^[0-9]{1,78}$/.test(b.fees.total) ? b.fees.total : null,
      },
      proof: { transfer_spec_hash: p.specHash, attested: true },
    });
  }

  #refs(ctx: ExecutionContext, p: Prepared): Record<string, unknown> {
    const s = p.intent.spec;
    const dest = this.#gateway.chains.find((c) => c.domain === s.destinationDomain);
    return {
      transfer_spec_hash: p.specHash,
      source_chain_id: this.chain.chainId,
      source_domain: s.sourceDomain,
      destination_domain: s.destinationDomain,
      ...(dest ? { destination_chain_id: dest.chain_id } : {}),
      depositor: this.from,
      recipient: `0x${s.destinationRecipient.slice(26)}`,
      amount_base_units: s.value.toString(),
      max_fee_base_units: p.intent.maxFee.toString(),
      max_block_height: p.intent.maxBlockHeight.toString(),
      attempt_key: ctx.idempotency_key ?? attemptKey(ctx.request_node_id, ctx.attempt_no),
    };
  }

  /** A completed intent needs nothing more: its answer is the node's result. */
  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    const p = this.#stored(ctx);
    if (!p) return manual('GATEWAY_NO_PREPARED_ACTION', 'the attempt has no prepared burn intent');
    return manual('GATEWAY_NOT_ATTESTED', `the burn intent ${p.specHash} was submitted without an attestation in Ferry`);
  }

  /**
   * The attempt's stored signed intent, posted again as it was (finishing what the attempt began;
   * Gateway's replay key is its spec hash). Without a stored signature nothing could reach Gateway: READY.
   */
  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    const p = this.#stored(ctx);
    const signature = signatureOf(ctx);
    if (!p || !signature) return result({ next_state: 'READY', error_code: 'GATEWAY_NOTHING_SENT', error_detail: 'the attempt has no signed burn intent: nothing could reach Gateway' });
    try {
      return await this.#post(ctx, p, signature, true);
    } catch (err) {
      if (err instanceof TemporaryMovementError) return result({ next_state: 'UNKNOWN', provider_state: 'unavailable', provider_refs: this.#refs(ctx, p), error_code: err.code, error_detail: err.message });
      throw err;
    }
  }

  /** Read only: the source wallet's GatewayBurned under the attempt's spec hash says whether Gateway spent the balance; nothing is posted. */
  async inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    const p = this.#stored(ctx);
    if (!p) return result({ next_state: 'UNKNOWN', error_code: 'GATEWAY_NO_PREPARED_ACTION', error_detail: 'the attempt has no prepared burn intent' });
    const refs = this.#refs(ctx, p);
    try {
      const wallet = `0x${p.intent.spec.sourceContract.slice(26)}` as Address;
      // From the head the intent was prepared at (its maxBlockHeight less the validity window), a little before.
      const prepared = p.intent.maxBlockHeight - BigInt(this.#gateway.intent_validity_blocks) - 100n;
      const logs = await this.chain.client.getContractEvents({ address: wallet, abi: gatewayWalletAbi, eventName: 'GatewayBurned', args: { transferSpecHash: p.specHash }, fromBlock: prepared > 0n ? prepared : 0n, toBlock: 'latest', strict: true });
      return result({ next_state: 'UNKNOWN', provider_state: logs.length > 0 ? 'burned' : 'no_burn_seen', provider_refs: { ...refs, burned: logs.length > 0 }, error_code: 'GATEWAY_INSPECT_ONLY', error_detail: logs.length > 0 ? `transfer spec ${p.specHash} is burned on the source` : `no GatewayBurned for ${p.specHash} on the source yet` });
    } catch (err) {
      return result({ next_state: 'UNKNOWN', provider_state: 'unavailable', provider_refs: refs, error_code: 'GATEWAY_RPC_UNAVAILABLE', error_detail: errorDetail(err) });
    }
  }

  async health(): Promise<Record<string, unknown>> {
    const block = await this.chain.client.getBlockNumber();
    return { ok: true, executor_key: this.executorKey, lane: this.lane, chain_id: this.chain.chainId, block_number: Number(block), from: this.from };
  }

  #stored(ctx: ExecutionContext): Prepared | null {
    const first = (ctx.attempt_artifacts ?? []).find((a) => a.artifact_type === 'prepared_action' && a.content_inline);
    if (!first?.content_inline) return null;
    try {
      return preparedOf((JSON.parse(first.content_inline) as PreparedAction).payload);
    } catch {
      return null;
    }
  }
}

function preparedOf(payload: string | null): Prepared | null {
  if (!payload) return null;
  try {
    const t = JSON.parse(payload) as { primaryType?: unknown; message?: unknown };
    if (t.primaryType !== 'BurnIntent') return null;
    const parsed = parseBurnIntentMessage(t.message);
    if (!parsed.ok) return null;
    return { payload, intent: parsed.value, specHash: transferSpecHash(parsed.value.spec) };
  } catch {
    return null;
  }
}

function signatureOf(ctx: ExecutionContext): string | null {
  const sig = (ctx.attempt_artifacts ?? []).find((a) => a.artifact_type === 'signature' && a.content_inline);
  return sig?.content_inline && /^0x[0-9a-fA-F]{130}$/.test(sig.content_inline) ? sig.content_inline : null;
}

/** A refusal's stable code, from Gateway's message. */
function refusalCode(message: string): string {
  if (/insufficient/i.test(message)) return 'GATEWAY_INSUFFICIENT_BALANCE';
  if (/fee/i.test(message)) return 'GATEWAY_FEE_TOO_LOW';
  if (/expired|block height/i.test(message)) return 'GATEWAY_INTENT_EXPIRED';
  if (/signature|signer/i.test(message)) return 'GATEWAY_SIGNATURE_REFUSED';
  return 'GATEWAY_TRANSFER_REFUSED';
}
