import { ContractFunctionExecutionError, erc20Abi, parseEventLogs, zeroAddress, type Address, type TransactionReceipt } from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import type { ExecutionContext, ExecutionResult } from '../protocol.ts';
import { fromBaseUnits } from '../evm/amounts.ts';
import type { EvmChain, EvmChains } from '../evm/chains.ts';
import { EvmContractCallExecutor, type ContractCall, type EvmContractCallOptions } from '../evm/contract-call.ts';
import { addressOf, amountOf, recipientOf, tokenOf, type Parsed } from '../evm/token-config.ts';
import { errorDetail } from '../evm/rpc-errors.ts';
import { failed, firstHints, result, type ReceiptCheck } from '../evm/tx-lifecycle.ts';
import { TemporaryMovementError } from '../errors.ts';
import type { IrisClient } from './attestation.ts';
import { CCTP_BURN_KEY, CCTP_LANE, cctpOf, cctpOfChainId, type CctpChain } from './common.ts';
import { feeOfMilliBps, maxFeeOf, quotedMilliBps, type MaxFeeBasis } from './fees.ts';
import { encodeDepositForBurn, FINALITY_FINALIZED, messageTransmitterAbi, tokenMessengerAbi, type BurnArgs } from './message.ts';

export interface CctpBurnOptions extends EvmContractCallOptions {
  chains: EvmChains;
  tokens: readonly EvmTokenConfig[];
  /** Circle's attestation service, for the fee quote of a fast transfer (null: none configured). */
  iris?: IrisClient | null;
}

/** What one burn is, resolved against the configuration and the chain: what prepare pins. */
interface Resolved {
  source: CctpChain;
  args: BurnArgs;
  decimals: number;
  amountText: string;
  maxFeeBasis: MaxFeeBasis;
}

/** The burn as prepare pinned it (provider_hints). */
interface Pinned {
  messenger: Address;
  transmitter: Address;
  token: Address;
  amount: bigint;
  mintRecipient: Address;
  destinationDomain: number;
  sourceDomain: number;
  decimals: number | null;
  maxFee: bigint | null;
  minFinalityThreshold: number | null;
}

/**
 * `exec.cctp.burn`: `depositForBurn` on the source chain's TokenMessengerV2, from one hot wallet.
 * The token must already allow the messenger to take the amount (see docs/cctp-lane.md: the lane
 * never approves on its own). The transaction's life (nonce, broadcast, observe, recovery from the
 * stored signed bytes, never a second burn) is the EVM lane's shared contract-call lifecycle
 * (evm/contract-call.ts); a successful receipt must also carry MessageSent from the transmitter
 * and the expected DepositForBurn.
 */
export class CctpBurnExecutor extends EvmContractCallExecutor<Pinned> {
  readonly executorKey = CCTP_BURN_KEY;
  readonly lane = CCTP_LANE;
  readonly #chains: EvmChains;
  readonly #tokens: readonly EvmTokenConfig[];
  readonly #iris: IrisClient | null;

  constructor(opts: CctpBurnOptions) {
    super(opts);
    this.#chains = opts.chains;
    this.#tokens = opts.tokens;
    this.#iris = opts.iris ?? null;
  }

  protected async check(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const r = await this.#resolve(ctx);
    if (!r.ok) return failed(r.code, r.detail);
    const { args, source, decimals } = r.value;
    const code = await this.tx.read('eth_getCode', () => this.chain.client.getCode({ address: source.tokenMessenger }));
    if (!code || code === '0x') return failed('CCTP_CONTRACT_MISSING', `${this.chain.label} has no TokenMessengerV2 at ${source.tokenMessenger}`);
    const [balance, allowance] = await this.tx.read('balanceOf/allowance', () =>
      Promise.all([
        this.chain.client.readContract({ address: args.burnToken, abi: erc20Abi, functionName: 'balanceOf', args: [this.from] }),
        this.chain.client.readContract({ address: args.burnToken, abi: erc20Abi, functionName: 'allowance', args: [this.from, source.tokenMessenger] }),
      ]),
    );
    if (balance < args.amount) {
      return failed('CCTP_INSUFFICIENT_BALANCE', `${this.from} holds ${fromBaseUnits(balance, decimals)} of token ${args.burnToken}, the burn needs ${r.value.amountText}`);
    }
    if (allowance < args.amount) {
      return failed(
        'CCTP_ALLOWANCE_INSUFFICIENT',
        `${this.from} allows the TokenMessengerV2 ${source.tokenMessenger} ${fromBaseUnits(allowance, decimals)} of token ${args.burnToken}, the burn needs ${r.value.amountText}; approve it first`,
      );
    }
    return this.#feeShortfall(r.value);
  }

  /**
   * The approved max fee against what the chain and Circle require now: the messenger's
   * getMinFeeAmount(amount) (the contract refuses less: "Insufficient max fee") and, for a fast
   * transfer, Circle's quote for the route (less is attested as a standard transfer). Below
   * either, the burn FAILS here, before anything is signed: the fee the approver fixed is never
   * raised behind their back.
   */
  async #feeShortfall(r: Resolved): Promise<ExecutionResult | null> {
    const { args, source, decimals } = r;
    let onChain: bigint;
    try {
      onChain = await this.chain.client.readContract({ address: source.tokenMessenger, abi: tokenMessengerAbi, functionName: 'getMinFeeAmount', args: [args.amount] });
    } catch (err) {
      if (!(err instanceof ContractFunctionExecutionError)) return this.tx.read('getMinFeeAmount', () => Promise.reject(err));
      // "Amount too low": a minimum fee is set and 1 base unit cannot carry a fee below itself.
      if (args.amount <= 1n) onChain = 1n;
      else return failed('CCTP_MIN_FEE_UNREADABLE', `the TokenMessengerV2 ${source.tokenMessenger} does not answer getMinFeeAmount(${args.amount}): ${errorDetail(err)}`);
    }
    let quoted: bigint | null = null;
    let quotedBps: string | null = null;
    if (args.minFinalityThreshold < FINALITY_FINALIZED) {
      if (!this.#iris) return failed('CCTP_INVALID_CONFIG', `a fast transfer (min_finality_threshold ${args.minFinalityThreshold}) needs Circle's fee quote: configure cctp.attestation_url`);
      const answer = await this.#iris.fees(source.domain, args.destinationDomain);
      if (answer.kind === 'rate_limited') throw new TemporaryMovementError('CCTP_FEE_QUOTE_UNAVAILABLE', `the fee quote is rate limited; asking again in ${answer.retryAfter} s`, { retry_after_seconds: answer.retryAfter });
      if (answer.kind !== 'ok') throw new TemporaryMovementError('CCTP_FEE_QUOTE_UNAVAILABLE', `no fee quote for ${source.domain} -> ${args.destinationDomain}: ${'detail' in answer ? answer.detail : answer.kind}`);
      const milli = quotedMilliBps(answer.body, args.minFinalityThreshold);
      if (milli === null) throw new TemporaryMovementError('CCTP_FEE_QUOTE_UNAVAILABLE', `the fee quote for ${source.domain} -> ${args.destinationDomain} has no entry for finality ${args.minFinalityThreshold}`);
      quoted = feeOfMilliBps(args.amount, milli);
      quotedBps = (Number(milli) / 1000).toString();
    }
    const required = quoted !== null && quoted > onChain ? quoted : onChain;
    if (args.maxFee >= required) return null;
    const units = (v: bigint) => `${fromBaseUnits(v, decimals)} (${v} base units)`;
    const why = quoted !== null && quoted >= onChain ? `Circle's fast-transfer fee of ${quotedBps} bps` : `the TokenMessengerV2's minimum fee (getMinFeeAmount)`;
    // The figures close the detail in a fixed form: a preflight refusal records only its code and detail.
    const quote = quoted !== null ? ` fee_quote_bps=${quotedBps} fee_quote_base_units=${quoted}` : '';
    return failed(
      'CCTP_MAX_FEE_TOO_LOW',
      `the approved max fee ${units(args.maxFee)} is below the ${units(required)} that ${why} requires for ${r.amountText}; approve a plan with a higher max_fee or max_fee_bps ` +
        `[required_base_units=${required} approved_base_units=${args.maxFee} min_fee_amount_base_units=${onChain}${quote}]`,
    );
  }

  protected async call(ctx: ExecutionContext): Promise<Parsed<ContractCall>> {
    const r = await this.#resolve(ctx);
    if (!r.ok) return r;
    const { source, args, amountText } = r.value;
    return {
      ok: true,
      value: {
        to: source.tokenMessenger,
        data: encodeDepositForBurn(args),
        hints: {
          to: source.tokenMessenger.toLowerCase(),
          token_messenger: source.tokenMessenger.toLowerCase(),
          message_transmitter: source.messageTransmitter.toLowerCase(),
          source_domain: source.domain,
          destination_domain: args.destinationDomain,
          token: args.burnToken.toLowerCase(),
          decimals: r.value.decimals,
          amount: amountText,
          amount_base_units: args.amount.toString(),
          mint_recipient: args.mintRecipient.toLowerCase(),
          destination_caller: args.destinationCaller.toLowerCase(),
          max_fee_base_units: args.maxFee.toString(),
          max_fee: fromBaseUnits(args.maxFee, r.value.decimals),
          max_fee_basis: r.value.maxFeeBasis,
          min_finality_threshold: args.minFinalityThreshold,
        },
        reverts: (detail) =>
          // The minimum changed between preflight and prepare: the same refusal as preflight's.
          /Insufficient max fee/.test(detail)
            ? failed('CCTP_MAX_FEE_TOO_LOW', `depositForBurn of ${amountText} reverts: the approved max fee ${fromBaseUnits(args.maxFee, r.value.decimals)} is below the chain's minimum (${detail})`)
            : failed('CCTP_BURN_WOULD_REVERT', `depositForBurn of ${amountText} reverts: ${detail}`),
      },
    };
  }

  protected pinned(ctx: ExecutionContext): Parsed<Pinned> {
    const none = { ok: false, code: 'CCTP_NO_PREPARED_ACTION', detail: 'the attempt has no prepared burn' } as const;
    const h = firstHints(ctx);
    if (typeof h.token_messenger !== 'string' || typeof h.message_transmitter !== 'string' || typeof h.token !== 'string' || typeof h.amount_base_units !== 'string') return none;
    try {
      return {
        ok: true,
        value: {
          messenger: h.token_messenger as Address,
          transmitter: h.message_transmitter as Address,
          token: h.token as Address,
          amount: BigInt(h.amount_base_units),
          mintRecipient: String(h.mint_recipient) as Address,
          destinationDomain: Number(h.destination_domain),
          sourceDomain: Number(h.source_domain),
          decimals: typeof h.decimals === 'number' ? h.decimals : null,
          maxFee: typeof h.max_fee_base_units === 'string' ? BigInt(h.max_fee_base_units) : null,
          minFinalityThreshold: typeof h.min_finality_threshold === 'number' ? h.min_finality_threshold : null,
        },
      };
    } catch {
      return none;
    }
  }

  protected receiptCheck(p: Pinned): ReceiptCheck {
    return burnCheck(p, this.from);
  }

  /**
   * The burn's facts for its successors: the attestation node reads tx_hash and source_domain, and
   * checks the attested message against the amount, recipient, domain and max fee; decimals let it
   * state what arrives (amount - feeExecuted) in token units.
   */
  protected override settle(r: ExecutionResult, p: Pinned): ExecutionResult {
    if (!r.provider_refs.tx_hash) return r;
    return {
      ...r,
      provider_refs: {
        ...r.provider_refs,
        source_domain: p.sourceDomain,
        destination_domain: p.destinationDomain,
        amount_base_units: p.amount.toString(),
        mint_recipient: p.mintRecipient,
        ...(p.decimals !== null ? { decimals: p.decimals } : {}),
        ...(p.maxFee !== null ? { max_fee_base_units: p.maxFee.toString() } : {}),
        ...(p.minFinalityThreshold !== null ? { min_finality_threshold: p.minFinalityThreshold } : {}),
      },
    };
  }

  async #resolve(ctx: ExecutionContext): Promise<Parsed<Resolved>> {
    const spec = burnSpec(ctx, this.chain, this.#chains, this.#tokens);
    if (!spec.ok) return spec;
    const { token } = spec.value;
    const amount = await this.tokenAmount(token, spec.value.amountText);
    if (!amount.ok) return amount;
    const { decimals } = amount.value;
    // From the approved config and amount only, as the signer's expected effect computes it.
    const fee = maxFeeOf(ctx.node_config, amount.value.amount, decimals);
    if (!fee.ok) return fee;
    return {
      ok: true,
      value: {
        source: spec.value.source,
        decimals,
        amountText: spec.value.amountText,
        maxFeeBasis: fee.value.basis,
        args: {
          amount: amount.value.amount,
          destinationDomain: spec.value.destinationDomain,
          mintRecipient: spec.value.mintRecipient,
          burnToken: token.address,
          destinationCaller: spec.value.destinationCaller,
          maxFee: fee.value.maxFee,
          minFinalityThreshold: spec.value.minFinalityThreshold,
        },
      },
    };
  }
}

/** What a burn node asks for, from its config, the intent and Ferry's configuration (no chain reads). */
export function burnSpec(
  ctx: Pick<ExecutionContext, 'node_config' | 'intent'>,
  chain: EvmChain,
  chains: EvmChains,
  tokens: readonly EvmTokenConfig[],
): Parsed<{
  source: CctpChain;
  destinationDomain: number;
  token: { address: Address; decimals: number | null };
  amountText: string;
  mintRecipient: Address;
  destinationCaller: Address;
  minFinalityThreshold: number;
}> {
  const cfg = ctx.node_config;
  const source = cctpOf(chain);
  if (!source.ok) return source;
  const destination = destinationDomainOf(cfg, chains);
  if (!destination.ok) return destination;
  if (destination.value === source.value.domain) return { ok: false, code: 'CCTP_INVALID_CONFIG', detail: `the destination domain ${destination.value} is the source chain's own` };
  const token = tokenOf({ ...cfg, token: cfg.token ?? ctx.intent.asset }, chain.chainId, tokens);
  if (!token.ok) return token;
  const amount = amountOf(ctx);
  if (!amount.ok) return amount;
  const recipient = recipientOf(ctx, 'mint_recipient');
  if (!recipient.ok) return recipient;
  let caller: Address = zeroAddress;
  if (cfg.destination_caller !== undefined && cfg.destination_caller !== null) {
    const c = addressOf(cfg.destination_caller, 'destination_caller');
    if (!c.ok) return c;
    caller = c.value;
  }
  const threshold = cfg.min_finality_threshold ?? FINALITY_FINALIZED;
  if (typeof threshold !== 'number' || !Number.isInteger(threshold) || threshold < 500 || threshold > FINALITY_FINALIZED) {
    return { ok: false, code: 'CCTP_INVALID_CONFIG', detail: 'min_finality_threshold must be an integer from 500 to 2000 (1000 confirmed, 2000 finalized)' };
  }
  const lower = (a: Address) => a.toLowerCase() as Address;
  return {
    ok: true,
    value: {
      source: source.value,
      destinationDomain: destination.value,
      token: { address: lower(token.value.address), decimals: token.value.decimals },
      amountText: amount.value,
      mintRecipient: lower(recipient.value),
      destinationCaller: lower(caller),
      minFinalityThreshold: threshold,
    },
  };
}

/** `destination_chain_id` (a configured chain with a cctp entry) and/or `destination_domain`; both: they must agree. */
export function destinationDomainOf(cfg: Record<string, unknown>, chains: EvmChains): Parsed<number> {
  let fromChain: number | null = null;
  if (cfg.destination_chain_id !== undefined) {
    const c = cctpOfChainId(chains, cfg.destination_chain_id, 'destination_chain_id');
    if (!c.ok) return c;
    fromChain = c.value.domain;
  }
  const raw = cfg.destination_domain;
  if (raw === undefined) {
    if (fromChain === null) return { ok: false, code: 'CCTP_INVALID_CONFIG', detail: 'the burn names neither destination_chain_id nor destination_domain' };
    return { ok: true, value: fromChain };
  }
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 0 || raw > 0xffffffff) return { ok: false, code: 'CCTP_INVALID_CONFIG', detail: 'destination_domain must be a CCTP domain id' };
  if (fromChain !== null && fromChain !== raw) {
    return { ok: false, code: 'CCTP_DESTINATION_DOMAIN_MISMATCH', detail: `destination_domain ${raw} is not the domain of destination_chain_id (${fromChain})` };
  }
  return { ok: true, value: raw };
}

/** A successful burn receipt carries MessageSent by the transmitter and this DepositForBurn by the messenger. */
function burnCheck(p: Pinned, from: Address): ReceiptCheck {
  return (receipt: TransactionReceipt, proof: Record<string, unknown>) => {
    const sent = parseEventLogs({ abi: messageTransmitterAbi, eventName: 'MessageSent', logs: receipt.logs, strict: true }).filter(
      (l) => l.address.toLowerCase() === p.transmitter.toLowerCase(),
    );
    const burns = parseEventLogs({ abi: tokenMessengerAbi, eventName: 'DepositForBurn', logs: receipt.logs, strict: true }).filter(
      (l) =>
        l.address.toLowerCase() === p.messenger.toLowerCase() &&
        l.args.burnToken.toLowerCase() === p.token.toLowerCase() &&
        l.args.depositor.toLowerCase() === from.toLowerCase() &&
        l.args.amount === p.amount &&
        l.args.destinationDomain === p.destinationDomain &&
        l.args.mintRecipient.toLowerCase().endsWith(p.mintRecipient.slice(2).toLowerCase()),
    );
    if (sent.length > 0 && burns.length > 0) {
      proof.message_sent_log_index = sent[0]!.logIndex;
      proof.deposit_for_burn_log_index = burns[0]!.logIndex;
      proof.amount_base_units = p.amount.toString();
      return null;
    }
    // Mined and successful without the burn's events: nobody can say what happened to the funds
    // without looking, and burning again could move them twice.
    return result({
      next_state: 'UNKNOWN',
      provider_state: 'mined_without_burn',
      provider_refs: { tx_hash: proof.tx_hash },
      proof,
      error_code: 'CCTP_BURN_EVENT_MISSING',
      error_detail: `transaction ${String(proof.tx_hash)} succeeded without ${sent.length === 0 ? 'MessageSent' : 'the expected DepositForBurn'}`,
      manual_intervention_required: true,
    });
  };
}
