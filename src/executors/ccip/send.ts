import { BaseError, ContractFunctionExecutionError, ContractFunctionRevertedError, erc20Abi, getAddress, parseEventLogs, zeroAddress, type Address, type Hex, type TransactionReceipt } from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import { FatalMovementError, TemporaryMovementError } from '../errors.ts';
import { fromBaseUnits } from '../evm/amounts.ts';
import type { EvmChain } from '../evm/chains.ts';
import type { EvmNonceManager } from '../evm/nonces.ts';
import { EvmContractCallExecutor, type ContractCall, type EvmContractCallOptions } from '../evm/contract-call.ts';
import { errorDetail } from '../evm/rpc-errors.ts';
import { amountOf, recipientOf, tokenOf, type Parsed } from '../evm/token-config.ts';
import { failed, firstHints, result, type ReceiptCheck } from '../evm/tx-lifecycle.ts';
import type { ExecutionContext, ExecutionResult, PreparedAction } from '../protocol.ts';
import { CCIP_LANE, CCIP_SEND_KEY } from './common.ts';
import type { CcipChain, CcipConfig } from './config.ts';
import { encodeCcipSend, encodeExtraArgsV2, encodeReceiver, onRampAbi, routerAbi, tokenMessage, type CcipMessage } from './router.ts';

export interface CcipSendOptions extends EvmContractCallOptions {
  tokens: readonly EvmTokenConfig[];
  ccip: CcipConfig;
}

/** A send resolved against the configuration: what prepare builds and the signer's effect fixes. */
interface Resolved {
  source: CcipChain;
  destination: CcipChain;
  router: Address;
  token: Address;
  symbol: string;
  decimals: number;
  amountText: string;
  amount: bigint;
  recipient: Address;
  message: CcipMessage;
  cap: bigint;
  /** The fee token (zero: native coin) and its symbol. */
  feeToken: Address;
  feeSymbol: string | null;
}

/** The send as prepare pinned it (provider_hints). */
interface Pinned {
  router: Address;
  onRamp: Address;
  token: Address;
  amount: bigint;
  recipient: Address;
  destSelector: bigint;
  sourceSelector: bigint;
  destinationChainId: number;
  extraArgs: Hex;
  decimals: number;
  feeWei: bigint;
  cap: bigint;
  feeToken: Address;
}

type Quote = { ok: true; fee: bigint } | { ok: false; code: string; detail: string; temporary?: boolean };

/**
 * `exec.ccip.send`: Chainlink CCIP `ccipSend` on the source chain's Router from one hot wallet, one
 * token amount to a receiver on the destination chain, the fee paid in native coin
 * (docs/ccip-lane.md). Before anything is signed it checks what the Router would refuse: the
 * destination selector is supported (isChainSupported), the balance and the Router's allowance (the
 * Router pulls the tokens with transferFrom), and the fee: `getFee` must be at most the approved cap
 * (config.max_fee_wei), else the node FAILS (CCIP_FEE_ABOVE_CAP) and nothing is signed. The
 * transaction carries exactly the quoted fee as value (the Router keeps the whole value). Right before
 * the submit, preSubmitCheck quotes again: a lane no longer supported or a fee above the cap fails the
 * node, a fee above the signed value (the send would revert) prepares it again, an RPC that does not
 * answer retries it. The rest (nonce, signing against the expected effect, broadcast, replacement,
 * recovery from the stored signed bytes, never a second send) is the EVM lane's contract-call
 * lifecycle; a successful receipt must carry the OnRamp's one CCIPMessageSent, whose messageId the
 * delivery observer follows on the destination chain.
 */
export class CcipSendExecutor extends EvmContractCallExecutor<Pinned> {
  readonly executorKey = CCIP_SEND_KEY;
  readonly lane = CCIP_LANE;
  readonly #tokens: readonly EvmTokenConfig[];
  readonly #ccip: CcipConfig;
  readonly #nonces: EvmNonceManager | null;

  constructor(opts: CcipSendOptions) {
    super(opts);
    this.#tokens = opts.tokens;
    this.#ccip = opts.ccip;
    this.#nonces = opts.nonces ?? null;
  }

  protected async check(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const r = await this.#resolve(ctx);
    if (!r.ok) return failed(r.code, r.detail);
    const v = r.value;
    const code = await this.tx.read('eth_getCode', () => this.chain.client.getCode({ address: v.router }));
    if (!code || code === '0x') return failed('CCIP_CONTRACT_MISSING', `${this.chain.label} has no Router at ${v.router}`);
    const supported = await this.#supported(v.router, BigInt(v.destination.selector));
    if (!supported) return failed('CCIP_LANE_NOT_SUPPORTED', `the Router ${v.router} on ${this.chain.label} does not support destination selector ${v.destination.selector} (isChainSupported is false)`);
    const [balance, allowance] = await this.tx.read('balanceOf/allowance', () =>
      Promise.all([
        this.chain.client.readContract({ address: v.token, abi: erc20Abi, functionName: 'balanceOf', args: [this.from] }),
        this.chain.client.readContract({ address: v.token, abi: erc20Abi, functionName: 'allowance', args: [this.from, v.router] }),
      ]),
    );
    if (balance < v.amount) return failed('CCIP_INSUFFICIENT_BALANCE', `${this.from} holds ${fromBaseUnits(balance, v.decimals)} ${v.symbol}, the send needs ${v.amountText}`);
    if (allowance < v.amount) {
      return failed('CCIP_ALLOWANCE_INSUFFICIENT', `${this.from} allows the Router ${v.router} ${fromBaseUnits(allowance, v.decimals)} ${v.symbol}, the send needs ${v.amountText}; approve it first`);
    }
    const q = await this.#capped(v.router, BigInt(v.destination.selector), v.message, v.cap);
    if (!q.ok) {
      if (q.temporary) throw new TemporaryMovementError(q.code, q.detail);
      return failed(q.code, q.detail);
    }
    if (v.feeToken !== zeroAddress) {
      const short = await this.#feeTokenShort(v.router, v.feeToken, q.fee);
      if (short) return failed(short.code, short.detail);
    }
    return null;
  }

  /** Paid in a fee token, the Router pulls the fee with transferFrom: the wallet must hold it and allow it (the plan's fee approval node). */
  async #feeTokenShort(router: Address, feeToken: Address, fee: bigint): Promise<{ code: string; detail: string } | null> {
    const [balance, allowance] = await this.tx.read('fee token balanceOf/allowance', () =>
      Promise.all([
        this.chain.client.readContract({ address: feeToken, abi: erc20Abi, functionName: 'balanceOf', args: [this.from] }),
        this.chain.client.readContract({ address: feeToken, abi: erc20Abi, functionName: 'allowance', args: [this.from, router] }),
      ]),
    );
    if (balance < fee) return { code: 'CCIP_FEE_TOKEN_BALANCE_INSUFFICIENT', detail: `${this.from} holds ${balance} base units of the fee token ${feeToken}, the fee is ${fee}` };
    if (allowance < fee) return { code: 'CCIP_FEE_ALLOWANCE_INSUFFICIENT', detail: `${this.from} allows the Router ${router} ${allowance} base units of the fee token ${feeToken}, the fee is ${fee}; the plan's fee approval must come first` };
    return null;
  }

  protected async call(ctx: ExecutionContext): Promise<Parsed<ContractCall>> {
    const r = await this.#resolve(ctx);
    if (!r.ok) return r;
    const v = r.value;
    const dest = BigInt(v.destination.selector);
    const onRamp = await this.tx.read('getOnRamp', () => this.chain.client.readContract({ address: v.router, abi: routerAbi, functionName: 'getOnRamp', args: [dest] }));
    if (BigInt(onRamp) === 0n) return { ok: false, code: 'CCIP_LANE_NOT_SUPPORTED', detail: `the Router ${v.router} has no OnRamp for destination selector ${v.destination.selector}` };
    // Quoted again at prepare: the fee sent is the one the Router asks now, never above the cap.
    const q = await this.#capped(v.router, dest, v.message, v.cap);
    if (!q.ok) {
      if (q.temporary) throw new TemporaryMovementError(q.code, q.detail);
      return q;
    }
    return {
      ok: true,
      value: {
        to: v.router,
        data: encodeCcipSend(dest, v.message),
        // Native: exactly the quoted fee (the Router keeps the whole value). A fee token: no value; the Router pulls the fee.
        value: v.feeToken === zeroAddress ? q.fee : 0n,
        hints: {
          to: v.router.toLowerCase(),
          router: v.router.toLowerCase(),
          on_ramp: onRamp.toLowerCase(),
          token: v.token.toLowerCase(),
          decimals: v.decimals,
          amount: v.amountText,
          amount_base_units: v.amount.toString(),
          source_chain_selector: v.source.selector,
          destination_chain_selector: v.destination.selector,
          destination_chain_id: v.destination.chain_id,
          recipient: v.recipient.toLowerCase(),
          extra_args: v.message.extraArgs,
          fee_wei: q.fee.toString(),
          max_fee_wei: v.cap.toString(),
          fee_token: v.feeToken.toLowerCase(),
        },
        reverts: (detail) => failed('CCIP_SEND_WOULD_REVERT', `ccipSend of ${v.amountText} ${v.symbol} to selector ${v.destination.selector} reverts: ${detail}`),
      },
    };
  }

  /**
   * The last gate before the broadcast (seed 003's pre_submit_check): the attempt still holds its
   * nonce, the Router still supports the destination, and `getFee` for the pinned message is at most
   * the approved cap (else FATAL: the node fails, nothing is sent) and at most the value the signed
   * transaction carries (else TEMPORARY: the Router would revert InsufficientFeeTokenAmount, so the
   * node is prepared again at the new fee). An RPC that does not answer is TEMPORARY. Either way
   * the attempt is abandoned before its broadcast, so its nonce reservation is released for the
   * next attempt (as a definite refusal at broadcast releases it): no gap is left behind.
   */
  override async preSubmitCheck(ctx: ExecutionContext, prepared?: PreparedAction): Promise<void> {
    await super.preSubmitCheck(ctx);
    try {
      await this.#quoteAgain(ctx, prepared);
    } catch (err) {
      await this.#releaseNonce(ctx, err instanceof Error ? err.message : String(err));
      throw err;
    }
  }

  /** The attempt's reservation, only while it is still merely reserved (never one cleared for broadcast). */
  async #releaseNonce(ctx: ExecutionContext, reason: string): Promise<void> {
    if (!this.#nonces) return;
    const held = await this.#nonces.reservationOf(this.from, ctx.request_node_id, ctx.attempt_no);
    if (!held || held.status !== 'reserved') return;
    await this.#nonces.release({ chainId: held.chain_id, sender: this.from, requestNodeId: ctx.request_node_id, attemptNo: ctx.attempt_no, nonce: held.nonce }, `pre_submit_check: ${reason}`.slice(0, 500));
  }

  async #quoteAgain(ctx: ExecutionContext, prepared?: PreparedAction): Promise<void> {
    // The attempt's own prepared action (its artifacts are not in the context yet).
    const p = pinnedOf(prepared?.provider_hints ?? firstHints(ctx));
    if (!p.ok) throw new FatalMovementError(p.code, `${p.code}: ${p.detail}`);
    const v = p.value;
    const supported = await this.#supported(v.router, v.destSelector).catch((err: unknown) => {
      throw new TemporaryMovementError('CCIP_RPC_UNAVAILABLE', `CCIP_RPC_UNAVAILABLE: ${this.chain.label} did not answer isChainSupported: ${errorDetail(err)}`);
    });
    if (!supported) throw new FatalMovementError('CCIP_LANE_NOT_SUPPORTED', `CCIP_LANE_NOT_SUPPORTED: the Router ${v.router} no longer supports destination selector ${v.destSelector}; nothing was sent`);
    const message = tokenMessage(v.recipient, getAddress(v.token), v.amount, v.extraArgs, v.feeToken === zeroAddress ? zeroAddress : getAddress(v.feeToken));
    const q = await this.#capped(v.router, v.destSelector, message, v.cap);
    if (!q.ok) {
      if (q.temporary) throw new TemporaryMovementError(q.code, `${q.code}: ${q.detail}`);
      throw new FatalMovementError(q.code, `${q.code}: ${q.detail}; nothing was sent`);
    }
    if (v.feeToken !== zeroAddress) {
      // The signed send carries no fee: the Router pulls getFee() (within the cap), which the wallet must still hold and allow.
      const short = await this.#feeTokenShort(getAddress(v.router), getAddress(v.feeToken), q.fee).catch((err: unknown) => {
        throw new TemporaryMovementError('CCIP_RPC_UNAVAILABLE', `CCIP_RPC_UNAVAILABLE: ${this.chain.label} did not answer the fee token's balance or allowance: ${errorDetail(err)}`);
      });
      if (short) throw new FatalMovementError(short.code, `${short.code}: ${short.detail}; nothing was sent`);
      return;
    }
    if (q.fee > v.feeWei) {
      throw new TemporaryMovementError('CCIP_FEE_ROSE', `CCIP_FEE_ROSE: the Router now asks ${q.fee} wei, the signed send carries ${v.feeWei} (it would revert); prepared again at the new fee, within the cap of ${v.cap}`, {
        retry_after_seconds: 1,
      });
    }
  }

  protected pinned(ctx: ExecutionContext): Parsed<Pinned> {
    return pinnedOf(firstHints(ctx));
  }

  protected receiptCheck(p: Pinned): ReceiptCheck {
    return sentCheck(p, this.from);
  }

  /** The send's facts for the delivery observer: the messageId, its sequence number, where it goes, to whom, how much. */
  protected override settle(r: ExecutionResult, p: Pinned): ExecutionResult {
    if (!r.provider_refs.tx_hash) return r;
    const id = r.proof?.message_id;
    return {
      ...r,
      provider_refs: {
        ...r.provider_refs,
        ...(typeof id === 'string' ? { message_id: id, sequence_number: r.proof?.sequence_number } : {}),
        ...(r.proof?.block_number !== undefined ? { source_block_number: r.proof.block_number } : {}),
        source_chain_id: this.chain.chainId,
        source_chain_selector: p.sourceSelector.toString(),
        destination_chain_selector: p.destSelector.toString(),
        destination_chain_id: p.destinationChainId,
        recipient: p.recipient,
        token: p.token,
        amount_base_units: p.amount.toString(),
        decimals: p.decimals,
        fee_wei: p.feeWei.toString(),
        ...(p.feeToken !== zeroAddress ? { fee_token: p.feeToken } : {}),
      },
    };
  }

  async #supported(router: Address, dest: bigint): Promise<boolean> {
    return this.tx.read('isChainSupported', () => this.chain.client.readContract({ address: router, abi: routerAbi, functionName: 'isChainSupported', args: [dest] }));
  }

  /** getFee for the message, or why it cannot be sent under the cap (a revert, above the cap); an RPC failure is temporary. */
  async #capped(router: Address, dest: bigint, message: CcipMessage, cap: bigint): Promise<Quote> {
    let fee: bigint;
    try {
      fee = await this.chain.client.readContract({ address: router, abi: routerAbi, functionName: 'getFee', args: [dest, message], account: this.from });
    } catch (err) {
      if (!(err instanceof ContractFunctionExecutionError)) return { ok: false, temporary: true, code: 'CCIP_RPC_UNAVAILABLE', detail: `${this.chain.label} did not answer getFee: ${errorDetail(err)}` };
      const reverted = err instanceof BaseError ? err.walk((e) => e instanceof ContractFunctionRevertedError) : null;
      const name = reverted instanceof ContractFunctionRevertedError ? reverted.data?.errorName : undefined;
      if (name === undefined && !(reverted instanceof ContractFunctionRevertedError)) {
        return { ok: false, temporary: true, code: 'CCIP_RPC_UNAVAILABLE', detail: `${this.chain.label} did not answer getFee: ${errorDetail(err)}` };
      }
      const code =
        name === 'UnsupportedDestinationChain' || name === 'DestinationChainNotEnabled'
          ? 'CCIP_LANE_NOT_SUPPORTED'
          : name === 'UnsupportedToken'
            ? 'CCIP_TOKEN_NOT_SUPPORTED'
            : name === 'MessageGasLimitTooHigh' || name === 'ExtraArgOutOfOrderExecutionMustBeTrue' || name === 'InvalidExtraArgsTag'
              ? 'CCIP_EXTRA_ARGS_REFUSED'
              : 'CCIP_QUOTE_REVERTED';
      return { ok: false, code, detail: `getFee to selector ${dest} reverts${name ? ` ${name}` : ''}: ${errorDetail(err)}` };
    }
    if (fee > cap) {
      const unit = message.feeToken === zeroAddress ? 'wei' : `base units of ${message.feeToken.toLowerCase()}`;
      return {
        ok: false,
        code: 'CCIP_FEE_ABOVE_CAP',
        detail: `the Router quotes a fee of ${fee} ${unit} for this send, above the approved cap of ${cap} (config.max_fee_wei); approve a plan with a higher cap [quoted_wei=${fee} cap_wei=${cap}]`,
      };
    }
    return { ok: true, fee };
  }

  async #resolve(ctx: ExecutionContext): Promise<Parsed<Resolved>> {
    const spec = sendSpec(ctx, this.chain, this.#ccip, this.#tokens);
    if (!spec.ok) return spec;
    const s = spec.value;
    const amount = await this.tokenAmount({ address: s.token, decimals: s.decimals }, s.amountText);
    if (!amount.ok) return amount;
    if (amount.value.amount === 0n) return { ok: false, code: 'CCIP_INVALID_CONFIG', detail: 'the amount is zero (the OnRamp refuses CannotSendZeroTokens)' };
    return {
      ok: true,
      value: {
        source: s.source,
        destination: s.destination,
        router: getAddress(s.source.router),
        token: s.token,
        symbol: s.symbol,
        decimals: amount.value.decimals,
        amountText: s.amountText,
        amount: amount.value.amount,
        recipient: s.recipient,
        cap: s.cap,
        feeToken: s.feeToken,
        feeSymbol: s.feeSymbol,
        message: tokenMessage(s.recipient, s.token, amount.value.amount, s.extraArgs, s.feeToken),
      },
    };
  }
}

/** The send as prepare pinned it, from the prepared action's provider_hints. */
function pinnedOf(h: Record<string, unknown>): Parsed<Pinned> {
  const none = { ok: false, code: 'CCIP_NO_PREPARED_ACTION', detail: 'the attempt has no prepared send' } as const;
  if (typeof h.router !== 'string' || typeof h.on_ramp !== 'string' || typeof h.token !== 'string' || typeof h.amount_base_units !== 'string' || typeof h.fee_wei !== 'string') return none;
  try {
    return {
      ok: true,
      value: {
        router: h.router as Address,
        onRamp: h.on_ramp as Address,
        token: h.token as Address,
        amount: BigInt(h.amount_base_units),
        recipient: String(h.recipient) as Address,
        destSelector: BigInt(String(h.destination_chain_selector)),
        sourceSelector: BigInt(String(h.source_chain_selector)),
        destinationChainId: Number(h.destination_chain_id),
        extraArgs: String(h.extra_args) as Hex,
        decimals: Number(h.decimals),
        feeWei: BigInt(h.fee_wei),
        cap: BigInt(String(h.max_fee_wei)),
        feeToken: (typeof h.fee_token === 'string' ? h.fee_token : zeroAddress) as Address,
      },
    };
  } catch {
    return none;
  }
}

/** What a send node asks for, from its config, the intent and Ferry's configuration (no chain reads). */
export function sendSpec(
  ctx: Pick<ExecutionContext, 'node_config' | 'intent'>,
  chain: EvmChain,
  ccip: CcipConfig,
  tokens: readonly EvmTokenConfig[],
): Parsed<{ source: CcipChain; destination: CcipChain; token: Address; symbol: string; decimals: number | null; amountText: string; recipient: Address; extraArgs: Hex; cap: bigint; feeToken: Address; feeSymbol: string | null }> {
  const cfg = ctx.node_config;
  const invalid = (detail: string) => ({ ok: false, code: 'CCIP_INVALID_CONFIG', detail }) as const;
  const source = ccip.chains.find((c) => c.chain_id === chain.chainId);
  if (!source) return { ok: false, code: 'CCIP_CHAIN_NOT_CONFIGURED', detail: `${chain.label} has no ccip entry` };
  if (cfg.destination_chain_id === undefined) return invalid('the send names no destination_chain_id');
  const destination = ccip.chains.find((c) => c.chain_id === Number(cfg.destination_chain_id));
  if (!destination) return { ok: false, code: 'CCIP_CHAIN_NOT_CONFIGURED', detail: `destination chain ${String(cfg.destination_chain_id)} has no ccip entry` };
  if (destination.chain_id === source.chain_id) return invalid(`the destination chain ${source.chain_id} is the source chain`);
  const token = tokenOf({ ...cfg, token: cfg.token ?? ctx.intent.asset }, chain.chainId, tokens);
  if (!token.ok) return token;
  const symbol = token.value.symbol;
  if (symbol === null || !ccip.tokens.includes(symbol)) return invalid(`token ${String(cfg.token ?? ctx.intent.asset)} is not one of ccip.tokens`);
  const amount = amountOf(ctx);
  if (!amount.ok) return amount;
  const recipient = recipientOf(ctx, 'to');
  if (!recipient.ok) return recipient;
  const extra = extraArgsOf(cfg);
  if (!extra.ok) return extra;
  const capRaw = cfg.max_fee_wei;
  if (!(typeof capRaw === 'string' && /^[0-9]+$/.test(capRaw)) && !(typeof capRaw === 'number' && Number.isSafeInteger(capRaw) && capRaw >= 0)) {
    return invalid('max_fee_wei is required: a whole number, the approved cap of the CCIP fee in the fee token\'s base units (wei of native coin by default)');
  }
  let feeToken: Address = zeroAddress;
  let feeSymbol: string | null = null;
  if (cfg.fee_token !== undefined && cfg.fee_token !== 'native') {
    if (typeof cfg.fee_token !== 'string' || !(ccip.fee_tokens ?? []).includes(cfg.fee_token)) return invalid(`fee_token ${JSON.stringify(cfg.fee_token)} is not one of ccip.fee_tokens`);
    const listed = tokens.find((t) => t.chain_id === chain.chainId && t.symbol === cfg.fee_token);
    if (!listed) return invalid(`fee token ${cfg.fee_token} is not listed in evm.tokens for chain ${chain.chainId}`);
    feeToken = getAddress(listed.address);
    feeSymbol = cfg.fee_token;
    if (feeToken.toLowerCase() === token.value.address.toLowerCase()) return invalid('fee_token is the token sent');
  }
  return {
    ok: true,
    value: { source, destination, token: token.value.address, symbol, decimals: token.value.decimals, amountText: amount.value, recipient: recipient.value, extraArgs: extra.value, cap: BigInt(capRaw), feeToken, feeSymbol },
  };
}

/** EVMExtraArgsV2 from config.gas_limit (default 0: no receiver call, tokens only) and config.allow_out_of_order_execution (default true). */
export function extraArgsOf(cfg: Record<string, unknown>): Parsed<Hex> {
  const gas = cfg.gas_limit ?? 0;
  if (typeof gas !== 'number' || !Number.isSafeInteger(gas) || gas < 0) return { ok: false, code: 'CCIP_INVALID_CONFIG', detail: 'gas_limit must be a whole number of gas (0: tokens only, no receiver call)' };
  const ooo = cfg.allow_out_of_order_execution ?? true;
  if (typeof ooo !== 'boolean') return { ok: false, code: 'CCIP_INVALID_CONFIG', detail: 'allow_out_of_order_execution must be true or false' };
  return { ok: true, value: encodeExtraArgsV2(BigInt(gas), ooo) };
}

/** A successful receipt carries the OnRamp's one CCIPMessageSent from the sender, to the selector, of the token and amount to the receiver: its messageId is the delivery's id. */
function sentCheck(p: Pinned, from: Address): ReceiptCheck {
  return (receipt: TransactionReceipt, proof: Record<string, unknown>) => {
    const receiver = encodeReceiver(p.recipient);
    const sent = parseEventLogs({ abi: onRampAbi, eventName: 'CCIPMessageSent', logs: receipt.logs, strict: true }).filter((l) => {
      const m = l.args.message;
      return (
        l.address.toLowerCase() === p.onRamp.toLowerCase() &&
        l.args.destChainSelector === p.destSelector &&
        m.sender.toLowerCase() === from.toLowerCase() &&
        m.receiver.toLowerCase() === receiver &&
        m.tokenAmounts.length === 1 &&
        m.tokenAmounts[0]!.amount === p.amount &&
        // Paid natively the Router records the wrapped native token as the fee token; a fee token is itself.
        (p.feeToken === zeroAddress || m.feeToken.toLowerCase() === p.feeToken.toLowerCase())
      );
    });
    if (sent.length === 1) {
      const m = sent[0]!.args.message;
      proof.message_id = m.header.messageId.toLowerCase();
      proof.sequence_number = m.header.sequenceNumber.toString();
      proof.ccip_message_sent_log_index = sent[0]!.logIndex;
      proof.fee_token_amount = m.feeTokenAmount.toString();
      return null;
    }
    // Mined and successful without the one expected CCIPMessageSent: what happened to the tokens is for a person to see.
    return result({
      next_state: 'UNKNOWN',
      provider_state: 'mined_without_ccip_message_sent',
      provider_refs: { tx_hash: proof.tx_hash },
      proof,
      error_code: 'CCIP_SENT_EVENT_MISSING',
      error_detail: `transaction ${String(proof.tx_hash)} succeeded with ${sent.length} matching CCIPMessageSent events (one expected)`,
      manual_intervention_required: true,
    });
  };
}
