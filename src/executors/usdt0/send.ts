import { BaseError, ContractFunctionExecutionError, ContractFunctionRevertedError, erc20Abi, getAddress, parseEventLogs, type Address, type Hex, type TransactionReceipt } from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import { fromBaseUnits, toBaseUnits } from '../evm/amounts.ts';
import type { EvmChain } from '../evm/chains.ts';
import { EvmContractCallExecutor, type ContractCall, type EvmContractCallOptions } from '../evm/contract-call.ts';
import { errorDetail } from '../evm/rpc-errors.ts';
import { addressOf, amountOf, recipientOf, tokenOf, type Parsed } from '../evm/token-config.ts';
import { failed, firstHints, result, type ReceiptCheck } from '../evm/tx-lifecycle.ts';
import type { ExecutionContext, ExecutionResult } from '../protocol.ts';
import { USDT0_LANE, USDT0_SEND_KEY } from './common.ts';
import type { Usdt0Config, Usdt0Deployment } from './config.ts';
import { addressToBytes32, DEFAULT_SHARED_DECIMALS, encodeSend, oftAbi, type SendParam } from './oft.ts';

export interface Usdt0SendOptions extends EvmContractCallOptions {
  tokens: readonly EvmTokenConfig[];
  usdt0: Usdt0Config;
}

/** A send resolved against the configuration: what prepare builds and the signer's effect fixes. */
interface Resolved {
  source: Usdt0Deployment;
  destination: Usdt0Deployment;
  oft: Address;
  token: Address;
  decimals: number;
  amountText: string;
  sp: SendParam;
  cap: bigint;
  refund: Address;
}

/** The send as prepare pinned it (provider_hints). */
interface Pinned {
  oft: Address;
  token: Address;
  amount: bigint;
  minAmount: bigint;
  dstEid: number;
  srcEid: number;
  destinationChainId: number;
  recipient: Address;
  decimals: number;
  nativeFee: bigint;
}

/**
 * `exec.usdt0.send`: LayerZero OFT v2 `send` on the source chain's USDT0 deployment, from one hot
 * wallet (docs/usdt0-lane.md). Before anything is signed it checks what the chain would refuse or
 * what would move funds elsewhere: the OFT's token, its shared decimals, its peer for the destination
 * eid (the configured destination OFT), the balance and allowance, and the fee: `quoteSend` is asked
 * for the native fee, which must be at most the approved cap (config.max_native_fee_wei), else the
 * node FAILS (USDT0_NATIVE_FEE_ABOVE_CAP) and nothing is signed. The transaction carries exactly the
 * quoted fee as value (the OFT refuses any other) and the endpoint's refund goes back to the sender
 * (or config.refund_address). The transaction's life (nonce, signing against the expected effect,
 * broadcast, replacement, recovery from the stored signed bytes, never a second send) is the EVM
 * lane's contract-call lifecycle; a successful receipt must carry the OFT's OFTSent, whose GUID the
 * credit observer looks for on the destination chain.
 */
export class Usdt0SendExecutor extends EvmContractCallExecutor<Pinned> {
  readonly executorKey = USDT0_SEND_KEY;
  readonly lane = USDT0_LANE;
  readonly #tokens: readonly EvmTokenConfig[];
  readonly #usdt0: Usdt0Config;

  constructor(opts: Usdt0SendOptions) {
    super(opts);
    this.#tokens = opts.tokens;
    this.#usdt0 = opts.usdt0;
  }

  protected async check(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const r = await this.#resolve(ctx);
    if (!r.ok) return failed(r.code, r.detail);
    const v = r.value;
    const code = await this.tx.read('eth_getCode', () => this.chain.client.getCode({ address: v.oft }));
    if (!code || code === '0x') return failed('USDT0_CONTRACT_MISSING', `${this.chain.label} has no OFT at ${v.oft}`);
    const [inner, shared, peer] = await this.#reads(v);
    if (inner === null || shared === null || peer === null) return failed('USDT0_NOT_AN_OFT', `${v.oft} on ${this.chain.label} does not answer token(), sharedDecimals() and peers(eid) as an OFT v2`);
    if (inner.toLowerCase() !== v.token.toLowerCase()) return failed('USDT0_TOKEN_MISMATCH', `the OFT ${v.oft} moves token ${inner}, the configuration says ${v.token}`);
    if (shared !== DEFAULT_SHARED_DECIMALS) return failed('USDT0_SHARED_DECIMALS_MISMATCH', `the OFT ${v.oft} has ${shared} shared decimals; the lane expects ${DEFAULT_SHARED_DECIMALS}`);
    const wantPeer = addressToBytes32(v.destination.oft);
    if (peer.toLowerCase() !== wantPeer) {
      return failed(
        BigInt(peer) === 0n ? 'USDT0_NO_PEER' : 'USDT0_PEER_MISMATCH',
        `the OFT ${v.oft} has peer ${peer} for eid ${v.destination.eid}; the configured destination OFT is ${v.destination.oft}`,
      );
    }
    const [balance, allowance] = await this.tx.read('balanceOf/allowance', () =>
      Promise.all([
        this.chain.client.readContract({ address: v.token, abi: erc20Abi, functionName: 'balanceOf', args: [this.from] }),
        this.chain.client.readContract({ address: v.token, abi: erc20Abi, functionName: 'allowance', args: [this.from, v.oft] }),
      ]),
    );
    if (balance < v.sp.amountLD) return failed('USDT0_INSUFFICIENT_BALANCE', `${this.from} holds ${fromBaseUnits(balance, v.decimals)} of token ${v.token}, the send needs ${v.amountText}`);
    if (allowance < v.sp.amountLD) {
      return failed('USDT0_ALLOWANCE_INSUFFICIENT', `${this.from} allows the OFT ${v.oft} ${fromBaseUnits(allowance, v.decimals)} of token ${v.token}, the send needs ${v.amountText}; approve it first`);
    }
    const fee = await this.#quote(v);
    return fee.ok ? null : fee.refusal;
  }

  protected async call(ctx: ExecutionContext): Promise<Parsed<ContractCall>> {
    const r = await this.#resolve(ctx);
    if (!r.ok) return r;
    const v = r.value;
    // Quoted again at prepare: the fee sent is the one the OFT asks now, never above the cap.
    const fee = await this.#quote(v);
    if (!fee.ok) return { ok: false, code: fee.refusal.error_code!, detail: fee.refusal.error_detail! };
    return {
      ok: true,
      value: {
        to: v.oft,
        data: encodeSend(v.sp, fee.nativeFee, v.refund),
        value: fee.nativeFee,
        hints: {
          to: v.oft.toLowerCase(),
          oft: v.oft.toLowerCase(),
          token: v.token.toLowerCase(),
          decimals: v.decimals,
          amount: v.amountText,
          amount_base_units: v.sp.amountLD.toString(),
          min_amount_base_units: v.sp.minAmountLD.toString(),
          source_eid: v.source.eid,
          destination_eid: v.destination.eid,
          destination_chain_id: v.destination.chain_id,
          recipient: `0x${v.sp.to.slice(26)}`,
          native_fee_wei: fee.nativeFee.toString(),
          max_native_fee_wei: v.cap.toString(),
          refund_address: v.refund.toLowerCase(),
        },
        reverts: (detail) => failed('USDT0_SEND_WOULD_REVERT', `send of ${v.amountText} to eid ${v.destination.eid} reverts: ${detail}`),
      },
    };
  }

  protected pinned(ctx: ExecutionContext): Parsed<Pinned> {
    const none = { ok: false, code: 'USDT0_NO_PREPARED_ACTION', detail: 'the attempt has no prepared send' } as const;
    const h = firstHints(ctx);
    if (typeof h.oft !== 'string' || typeof h.token !== 'string' || typeof h.amount_base_units !== 'string' || typeof h.native_fee_wei !== 'string') return none;
    try {
      return {
        ok: true,
        value: {
          oft: h.oft as Address,
          token: h.token as Address,
          amount: BigInt(h.amount_base_units),
          minAmount: BigInt(String(h.min_amount_base_units)),
          dstEid: Number(h.destination_eid),
          srcEid: Number(h.source_eid),
          destinationChainId: Number(h.destination_chain_id),
          recipient: String(h.recipient) as Address,
          decimals: Number(h.decimals),
          nativeFee: BigInt(h.native_fee_wei),
        },
      };
    } catch {
      return none;
    }
  }

  protected receiptCheck(p: Pinned): ReceiptCheck {
    return sentCheck(p, this.from);
  }

  /** The send's facts for the credit observer: the GUID, where it goes, to whom, how much arrives. */
  protected override settle(r: ExecutionResult, p: Pinned): ExecutionResult {
    if (!r.provider_refs.tx_hash) return r;
    const guid = r.proof?.guid;
    return {
      ...r,
      provider_refs: {
        ...r.provider_refs,
        ...(typeof guid === 'string' ? { guid } : {}),
        ...(r.proof?.block_number !== undefined ? { source_block_number: r.proof.block_number } : {}),
        source_chain_id: this.chain.chainId,
        source_eid: p.srcEid,
        destination_eid: p.dstEid,
        destination_chain_id: p.destinationChainId,
        recipient: p.recipient,
        amount_base_units: p.amount.toString(),
        ...(r.proof?.amount_received_base_units !== undefined ? { amount_received_base_units: r.proof.amount_received_base_units } : {}),
        decimals: p.decimals,
        native_fee_wei: p.nativeFee.toString(),
      },
    };
  }

  async #reads(v: Resolved): Promise<[string | null, number | null, Hex | null]> {
    const one = async <T>(what: string, f: () => Promise<T>): Promise<T | null> => {
      try {
        return await f();
      } catch (err) {
        if (err instanceof ContractFunctionExecutionError) return null;
        return this.tx.read(what, () => Promise.reject(err));
      }
    };
    const c = this.chain.client;
    return Promise.all([
      one('token', () => c.readContract({ address: v.oft, abi: oftAbi, functionName: 'token' })),
      one('sharedDecimals', () => c.readContract({ address: v.oft, abi: oftAbi, functionName: 'sharedDecimals' })),
      one('peers', () => c.readContract({ address: v.oft, abi: oftAbi, functionName: 'peers', args: [v.destination.eid] })),
    ]);
  }

  /** quoteSend(sp, false): the native fee, or the refusal (above the cap, a revert) that fails the node before signing. */
  async #quote(v: Resolved): Promise<{ ok: true; nativeFee: bigint } | { ok: false; refusal: ExecutionResult }> {
    let fee: { nativeFee: bigint; lzTokenFee: bigint };
    try {
      fee = await this.chain.client.readContract({ address: v.oft, abi: oftAbi, functionName: 'quoteSend', args: [v.sp, false], account: this.from });
    } catch (err) {
      if (!(err instanceof ContractFunctionExecutionError)) return this.tx.read('quoteSend', () => Promise.reject(err));
      const reverted = err instanceof BaseError ? err.walk((e) => e instanceof ContractFunctionRevertedError) : null;
      const name = reverted instanceof ContractFunctionRevertedError ? reverted.data?.errorName : undefined;
      const code = name === 'SlippageExceeded' ? 'USDT0_SLIPPAGE_EXCEEDED' : name === 'NoPeer' ? 'USDT0_NO_PEER' : name === 'InvalidOptions' ? 'USDT0_INVALID_OPTIONS' : 'USDT0_QUOTE_REVERTED';
      return { ok: false, refusal: failed(code, `quoteSend of ${v.amountText} to eid ${v.destination.eid} reverts: ${errorDetail(err)}`) };
    }
    if (fee.lzTokenFee !== 0n) return { ok: false, refusal: failed('USDT0_QUOTE_INVALID', `quoteSend asks ${fee.lzTokenFee} in lz token for a native-fee send`) };
    if (fee.nativeFee > v.cap) {
      return {
        ok: false,
        refusal: failed(
          'USDT0_NATIVE_FEE_ABOVE_CAP',
          `the OFT quotes a native fee of ${fee.nativeFee} wei for this send, above the approved cap of ${v.cap} wei (config.max_native_fee_wei); approve a plan with a higher cap ` +
            `[quoted_wei=${fee.nativeFee} cap_wei=${v.cap}]`,
        ),
      };
    }
    return { ok: true, nativeFee: fee.nativeFee };
  }

  async #resolve(ctx: ExecutionContext): Promise<Parsed<Resolved>> {
    const spec = sendSpec(ctx, this.chain, this.#usdt0, this.#tokens, this.from);
    if (!spec.ok) return spec;
    const s = spec.value;
    const amount = await this.tokenAmount({ address: s.token, decimals: s.decimals }, s.amountText);
    if (!amount.ok) return amount;
    const { decimals } = amount.value;
    const rate = 10n ** BigInt(Math.max(0, decimals - DEFAULT_SHARED_DECIMALS));
    if (amount.value.amount % rate !== 0n) {
      return { ok: false, code: 'USDT0_AMOUNT_HAS_DUST', detail: `${s.amountText} has dust below ${DEFAULT_SHARED_DECIMALS} shared decimals: the OFT would send only ${fromBaseUnits((amount.value.amount / rate) * rate, decimals)}` };
    }
    let minAmount = amount.value.amount;
    if (s.minAmountText !== null) {
      const m = toBaseUnits(s.minAmountText, decimals);
      if (!m.ok) return { ok: false, code: 'USDT0_INVALID_CONFIG', detail: `min_amount: ${m.detail}` };
      if (m.value > amount.value.amount) return { ok: false, code: 'USDT0_INVALID_CONFIG', detail: 'min_amount is above the amount' };
      minAmount = m.value;
    }
    return {
      ok: true,
      value: {
        source: s.source,
        destination: s.destination,
        oft: getAddress(s.source.oft),
        token: s.token,
        decimals,
        amountText: s.amountText,
        cap: s.cap,
        refund: s.refund,
        sp: { dstEid: s.destination.eid, to: addressToBytes32(s.recipient), amountLD: amount.value.amount, minAmountLD: minAmount, extraOptions: s.extraOptions, composeMsg: '0x', oftCmd: '0x' },
      },
    };
  }
}

/** What a send node asks for, from its config, the intent and Ferry's configuration (no chain reads). */
export function sendSpec(
  ctx: Pick<ExecutionContext, 'node_config' | 'intent'>,
  chain: EvmChain,
  usdt0: Usdt0Config,
  tokens: readonly EvmTokenConfig[],
  from: Address,
): Parsed<{
  source: Usdt0Deployment;
  destination: Usdt0Deployment;
  token: Address;
  decimals: number | null;
  amountText: string;
  minAmountText: string | null;
  recipient: Address;
  extraOptions: Hex;
  cap: bigint;
  refund: Address;
}> {
  const cfg = ctx.node_config;
  const invalid = (detail: string) => ({ ok: false, code: 'USDT0_INVALID_CONFIG', detail }) as const;
  const source = usdt0.deployments.find((d) => d.chain_id === chain.chainId);
  if (!source) return { ok: false, code: 'USDT0_CHAIN_NOT_CONFIGURED', detail: `${chain.label} has no usdt0 deployment` };
  let destination: Usdt0Deployment | undefined;
  if (cfg.destination_chain_id !== undefined) {
    destination = usdt0.deployments.find((d) => d.chain_id === Number(cfg.destination_chain_id));
    if (!destination) return { ok: false, code: 'USDT0_CHAIN_NOT_CONFIGURED', detail: `destination chain ${String(cfg.destination_chain_id)} has no usdt0 deployment` };
  }
  if (cfg.destination_eid !== undefined) {
    const byEid = usdt0.deployments.find((d) => d.eid === cfg.destination_eid);
    if (!byEid) return { ok: false, code: 'USDT0_CHAIN_NOT_CONFIGURED', detail: `eid ${String(cfg.destination_eid)} has no usdt0 deployment` };
    if (destination && destination !== byEid) return { ok: false, code: 'USDT0_DESTINATION_MISMATCH', detail: `destination_eid ${String(cfg.destination_eid)} is not the eid of destination_chain_id (${destination.eid})` };
    destination = byEid;
  }
  if (!destination) return invalid('the send names neither destination_chain_id nor destination_eid');
  if (destination.eid === source.eid) return invalid(`the destination eid ${source.eid} is the source chain's own`);
  const token = tokenOf({ ...cfg, token: cfg.token ?? ctx.intent.asset ?? source.token }, chain.chainId, tokens);
  if (!token.ok) return token;
  const listed = tokens.find((t) => t.chain_id === chain.chainId && t.symbol === source.token);
  if (!listed || listed.address.toLowerCase() !== token.value.address.toLowerCase()) return invalid(`the send moves ${source.token} (usdt0.deployments[].token), not ${String(cfg.token ?? ctx.intent.asset)}`);
  const amount = amountOf(ctx);
  if (!amount.ok) return amount;
  let minAmountText: string | null = null;
  if (cfg.min_amount !== undefined) {
    if (typeof cfg.min_amount !== 'string' && typeof cfg.min_amount !== 'number') return invalid('min_amount must be a decimal string in token units');
    minAmountText = String(cfg.min_amount);
  }
  const recipient = recipientOf(ctx, 'to');
  if (!recipient.ok) return recipient;
  const options = cfg.extra_options ?? '0x';
  if (typeof options !== 'string' || !/^0x([0-9a-fA-F]{2})*$/.test(options) || (options !== '0x' && !options.toLowerCase().startsWith('0x0003'))) {
    return invalid('extra_options must be hex: empty, or type-3 options (0x0003...)');
  }
  const capRaw = cfg.max_native_fee_wei;
  if (!(typeof capRaw === 'string' && /^[0-9]+$/.test(capRaw)) && !(typeof capRaw === 'number' && Number.isSafeInteger(capRaw) && capRaw >= 0)) {
    return invalid('max_native_fee_wei is required: a whole number of wei, the approved cap of the LayerZero fee');
  }
  let refund: Address = from;
  if (cfg.refund_address !== undefined && cfg.refund_address !== null) {
    const r = addressOf(cfg.refund_address, 'refund_address');
    if (!r.ok) return r;
    refund = r.value;
  }
  return {
    ok: true,
    value: {
      source,
      destination,
      token: token.value.address,
      decimals: token.value.decimals,
      amountText: amount.value,
      minAmountText,
      recipient: recipient.value,
      extraOptions: options.toLowerCase() as Hex,
      cap: BigInt(capRaw),
      refund,
    },
  };
}

/** A successful receipt carries the OFT's OFTSent from the sender, to the eid, of the amount: its GUID is the delivery's id. */
function sentCheck(p: Pinned, from: Address): ReceiptCheck {
  return (receipt: TransactionReceipt, proof: Record<string, unknown>) => {
    const sent = parseEventLogs({ abi: oftAbi, eventName: 'OFTSent', logs: receipt.logs, strict: true }).filter(
      (l) => l.address.toLowerCase() === p.oft.toLowerCase() && l.args.fromAddress.toLowerCase() === from.toLowerCase() && l.args.dstEid === p.dstEid && l.args.amountSentLD === p.amount,
    );
    if (sent.length === 1) {
      proof.guid = sent[0]!.args.guid.toLowerCase();
      proof.oft_sent_log_index = sent[0]!.logIndex;
      proof.amount_received_base_units = sent[0]!.args.amountReceivedLD.toString();
      return null;
    }
    // Mined and successful without the one expected OFTSent: what happened to the tokens is for a person to see.
    return result({
      next_state: 'UNKNOWN',
      provider_state: 'mined_without_oft_sent',
      provider_refs: { tx_hash: proof.tx_hash },
      proof,
      error_code: 'USDT0_SENT_EVENT_MISSING',
      error_detail: `transaction ${String(proof.tx_hash)} succeeded with ${sent.length} matching OFTSent events (one expected)`,
      manual_intervention_required: true,
    });
  };
}
