import { BaseError, ContractFunctionExecutionError, erc20Abi, ExecutionRevertedError, parseEventLogs, serializeTransaction, zeroAddress, type Address, type TransactionReceipt } from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import type { ExecutionContext, ExecutionResult, Executor, PreparedAction, SubmitOptions } from '../protocol.ts';
import { fromBaseUnits, toBaseUnits } from '../evm/amounts.ts';
import type { EvmChain, EvmChains } from '../evm/chains.ts';
import type { EvmNonceManager } from '../evm/nonces.ts';
import { errorDetail } from '../evm/rpc-errors.ts';
import { addressOf, amountOf, confirmationsOf, recipientOf, tokenOf, type Parsed } from '../evm/token-config.ts';
import { awaitingSignature, EvmTxLifecycle, failed, manual, result, type Finality, type ReceiptCheck, type TxLifecycleOptions } from '../evm/tx-lifecycle.ts';
import { CCTP_BURN_KEY, CCTP_LANE, cctpOf, cctpOfChainId, type CctpChain } from './common.ts';
import { encodeDepositForBurn, FINALITY_FINALIZED, messageTransmitterAbi, tokenMessengerAbi, type BurnArgs } from './message.ts';

/** Estimated gas times this percentage is the burn's gas limit. */
const GAS_MARGIN_PERCENT = 125n;

export interface CctpBurnOptions {
  chain: EvmChain;
  chains: EvmChains;
  from: Address;
  tokens: readonly EvmTokenConfig[];
  nonces?: EvmNonceManager | null;
  feeBump?: TxLifecycleOptions['feeBump'];
}

/** What one burn is, resolved against the configuration and the chain: what prepare pins. */
interface Resolved {
  source: CctpChain;
  args: BurnArgs;
  decimals: number;
  amountText: string;
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
}

/**
 * `exec.cctp.burn`: `depositForBurn` on the source chain's TokenMessengerV2, from one hot wallet.
 * The token must already allow the messenger to take the amount (see docs/cctp-lane.md: the lane
 * never approves on its own). The transaction's life (nonce, broadcast, observe, recovery from the
 * stored signed bytes, never a second burn) is the EVM lane's shared lifecycle; a successful
 * receipt must also carry MessageSent from the transmitter and the expected DepositForBurn.
 */
export class CctpBurnExecutor implements Executor {
  readonly executorKey = CCTP_BURN_KEY;
  readonly lane = CCTP_LANE;
  readonly from: Address;
  readonly #chain: EvmChain;
  readonly #chains: EvmChains;
  readonly #tokens: readonly EvmTokenConfig[];
  readonly #tx: EvmTxLifecycle;

  constructor(opts: CctpBurnOptions) {
    this.#chain = opts.chain;
    this.#chains = opts.chains;
    this.from = opts.from.toLowerCase() as Address;
    this.#tokens = opts.tokens;
    this.#tx = new EvmTxLifecycle(opts.chain.client, opts.chain.pollSeconds, this.from, { nonces: opts.nonces, feeBump: opts.feeBump });
  }

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const chainId = await this.#tx.read('eth_chainId', () => this.#chain.client.getChainId());
    if (chainId !== this.#chain.chainId) return failed('EVM_CHAIN_MISMATCH', `${this.#chain.label}: the RPC serves chain ${chainId}`);
    const r = await this.#resolve(ctx);
    if (!r.ok) return failed(r.code, r.detail);
    const { args, source, decimals } = r.value;
    const code = await this.#tx.read('eth_getCode', () => this.#chain.client.getCode({ address: source.tokenMessenger }));
    if (!code || code === '0x') return failed('CCTP_CONTRACT_MISSING', `${this.#chain.label} has no TokenMessengerV2 at ${source.tokenMessenger}`);
    const [balance, allowance] = await this.#tx.read('balanceOf/allowance', () =>
      Promise.all([
        this.#chain.client.readContract({ address: args.burnToken, abi: erc20Abi, functionName: 'balanceOf', args: [this.from] }),
        this.#chain.client.readContract({ address: args.burnToken, abi: erc20Abi, functionName: 'allowance', args: [this.from, source.tokenMessenger] }),
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
    return null;
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const r = await this.#resolve(ctx);
    if (!r.ok) return failed(r.code, r.detail);
    const { source, args } = r.value;
    const data = encodeDepositForBurn(args);
    let estimate: bigint;
    try {
      estimate = await this.#chain.client.estimateGas({ account: this.from, to: source.tokenMessenger, data });
    } catch (err) {
      if (reverted(err)) return failed('CCTP_BURN_WOULD_REVERT', `depositForBurn of ${r.value.amountText} reverts: ${errorDetail(err)}`);
      return this.#tx.read('eth_estimateGas', () => Promise.reject(err));
    }
    // The nonce reservation is prepareTx's last step: nothing below can fail.
    const { chainId, nonce, maxFeePerGas, maxPriorityFeePerGas } = await this.#tx.prepareTx(ctx);
    const gas = (estimate * GAS_MARGIN_PERCENT + 99n) / 100n;
    const payload = serializeTransaction({ type: 'eip1559', chainId, nonce, to: source.tokenMessenger, value: 0n, data, gas, maxFeePerGas, maxPriorityFeePerGas });
    return awaitingSignature(ctx, payload, {
      chain_id: chainId,
      nonce,
      from: this.from,
      to: source.tokenMessenger.toLowerCase(),
      token_messenger: source.tokenMessenger.toLowerCase(),
      message_transmitter: source.messageTransmitter.toLowerCase(),
      source_domain: source.domain,
      destination_domain: args.destinationDomain,
      token: args.burnToken.toLowerCase(),
      decimals: r.value.decimals,
      amount: r.value.amountText,
      amount_base_units: args.amount.toString(),
      mint_recipient: args.mintRecipient.toLowerCase(),
      destination_caller: args.destinationCaller.toLowerCase(),
      max_fee_base_units: args.maxFee.toString(),
      min_finality_threshold: args.minFinalityThreshold,
      gas_limit: gas.toString(),
      gas_estimate: estimate.toString(),
    });
  }

  preSubmitCheck(ctx: ExecutionContext): Promise<void> {
    return this.#tx.preSubmitCheck(ctx);
  }

  submit(ctx: ExecutionContext, prepared: PreparedAction, opts: SubmitOptions = {}): Promise<ExecutionResult> {
    return this.#tx.submitSigned(ctx, prepared, opts);
  }

  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    const pinned = pinnedOf(ctx);
    if (!pinned) return manual('CCTP_NO_PREPARED_ACTION', 'the attempt has no prepared burn');
    return withBurnRefs(await this.#tx.observe(ctx, this.#finality(ctx), burnCheck(pinned, this.from)), pinned);
  }

  /** From the stored signed bytes and the chain only: the same bytes may be sent again, a new burn never. */
  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    const pinned = pinnedOf(ctx);
    if (!pinned) return this.#tx.recoverUnsigned(ctx);
    return withBurnRefs(await this.#tx.recover(ctx, this.#finality(ctx), burnCheck(pinned, this.from)), pinned);
  }

  async health(): Promise<Record<string, unknown>> {
    const [chainId, blockNumber] = await Promise.all([this.#chain.client.getChainId(), this.#chain.client.getBlockNumber()]);
    return { ok: true, executor_key: this.executorKey, lane: CCTP_LANE, chain_id: chainId, block_number: Number(blockNumber), from: this.from };
  }

  #finality(ctx: ExecutionContext): Finality {
    const c = confirmationsOf(ctx.node_config, this.#chain.confirmations);
    return { confirmations: c.ok ? c.value : this.#chain.confirmations, finalized: this.#chain.finality === 'finalized' };
  }

  async #resolve(ctx: ExecutionContext): Promise<Parsed<Resolved>> {
    const spec = burnSpec(ctx, this.#chain, this.#chains, this.#tokens);
    if (!spec.ok) return spec;
    const { token } = spec.value;
    const code = await this.#tx.read('eth_getCode', () => this.#chain.client.getCode({ address: token.address }));
    if (!code || code === '0x') return { ok: false, code: 'EVM_INVALID_TOKEN', detail: `${this.#chain.label} has no contract at ${token.address}` };
    let onChain: number;
    try {
      onChain = await this.#chain.client.readContract({ address: token.address, abi: erc20Abi, functionName: 'decimals' });
    } catch (err) {
      if (err instanceof ContractFunctionExecutionError) return { ok: false, code: 'EVM_INVALID_TOKEN', detail: `${token.address} does not answer decimals(): ${errorDetail(err)}` };
      return this.#tx.read('decimals', () => Promise.reject(err));
    }
    if (token.decimals !== null && token.decimals !== onChain) {
      return { ok: false, code: 'EVM_TOKEN_DECIMALS_MISMATCH', detail: `token ${token.address} has ${onChain} decimals on ${this.#chain.label}, the configuration says ${token.decimals}` };
    }
    const amount = toBaseUnits(spec.value.amountText, onChain);
    if (!amount.ok) return { ok: false, code: 'EVM_INVALID_AMOUNT', detail: amount.detail };
    if (amount.value <= 0n) return { ok: false, code: 'EVM_INVALID_AMOUNT', detail: 'amount must be more than zero' };
    const maxFee = toBaseUnits(spec.value.maxFeeText, onChain);
    if (!maxFee.ok) return { ok: false, code: 'CCTP_INVALID_CONFIG', detail: `max_fee: ${maxFee.detail}` };
    if (maxFee.value >= amount.value) return { ok: false, code: 'CCTP_MAX_FEE_INVALID', detail: `max_fee ${spec.value.maxFeeText} must be less than the amount ${spec.value.amountText}` };
    return {
      ok: true,
      value: {
        source: spec.value.source,
        decimals: onChain,
        amountText: spec.value.amountText,
        args: {
          amount: amount.value,
          destinationDomain: spec.value.destinationDomain,
          mintRecipient: spec.value.mintRecipient,
          burnToken: token.address,
          destinationCaller: spec.value.destinationCaller,
          maxFee: maxFee.value,
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
  maxFeeText: string;
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
  const maxFee = cfg.max_fee ?? '0';
  if (typeof maxFee !== 'string' && typeof maxFee !== 'number') return { ok: false, code: 'CCTP_INVALID_CONFIG', detail: 'max_fee must be a decimal string in token units' };
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
      maxFeeText: String(maxFee),
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

function reverted(err: unknown): boolean {
  return err instanceof BaseError && err.walk((e) => e instanceof ExecutionRevertedError) instanceof ExecutionRevertedError;
}

function pinnedOf(ctx: ExecutionContext): Pinned | null {
  const prepared = (ctx.attempt_artifacts ?? []).find((a) => a.artifact_type === 'prepared_action' && a.content_inline);
  if (!prepared?.content_inline) return null;
  try {
    const h = (JSON.parse(prepared.content_inline) as { provider_hints?: Record<string, unknown> }).provider_hints ?? {};
    if (typeof h.token_messenger !== 'string' || typeof h.message_transmitter !== 'string' || typeof h.token !== 'string' || typeof h.amount_base_units !== 'string') return null;
    return {
      messenger: h.token_messenger as Address,
      transmitter: h.message_transmitter as Address,
      token: h.token as Address,
      amount: BigInt(h.amount_base_units),
      mintRecipient: String(h.mint_recipient) as Address,
      destinationDomain: Number(h.destination_domain),
      sourceDomain: Number(h.source_domain),
    };
  } catch {
    return null;
  }
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

/** The burn's facts for its successors (the attestation node reads tx_hash and source_domain). */
function withBurnRefs(r: ExecutionResult, p: Pinned): ExecutionResult {
  if (!r.provider_refs.tx_hash) return r;
  return {
    ...r,
    provider_refs: { ...r.provider_refs, source_domain: p.sourceDomain, destination_domain: p.destinationDomain, amount_base_units: p.amount.toString(), mint_recipient: p.mintRecipient },
  };
}
