import { encodeFunctionData, erc20Abi, getAddress, parseEventLogs, type Address, type TransactionReceipt } from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import { toBaseUnits } from '../evm/amounts.ts';
import { EvmContractCallExecutor, type ContractCall, type EvmContractCallOptions } from '../evm/contract-call.ts';
import type { Parsed } from '../evm/token-config.ts';
import { failed, firstHints, result, type ReceiptCheck } from '../evm/tx-lifecycle.ts';
import type { ExecutionContext, ExecutionResult } from '../protocol.ts';
import { CCIP_FEE_APPROVAL_KEY, CCIP_LANE } from './common.ts';
import type { CcipConfig } from './config.ts';

export interface CcipFeeApprovalOptions extends EvmContractCallOptions {
  tokens: readonly EvmTokenConfig[];
  ccip: CcipConfig;
}

interface Pinned {
  token: Address;
  spender: Address;
  amount: bigint;
}

/**
 * `exec.ccip.fee_approval`: the ERC-20 `approve(router, cap)` of a fee token (one of ccip.fee_tokens,
 * LINK) from the hot wallet to this chain's CCIP Router, the node before a send that pays its fee in
 * that token (docs/ccip-lane.md, "Fees in LINK"). Its node names `config.token_approval: { token,
 * spender: "ccip.router", amount }`, from which the signer derives the approve it signs (that token,
 * the Router, that amount in token units): an approve sets the allowance, so afterwards the Router
 * can pull at most the cap, whatever allowance stood before. One approve, one transaction: the EVM
 * lane's contract-call lifecycle (nonce, stored signed bytes, recovery from them); the receipt must
 * carry the token's Approval(wallet, Router, amount).
 */
export class CcipFeeApprovalExecutor extends EvmContractCallExecutor<Pinned> {
  readonly executorKey = CCIP_FEE_APPROVAL_KEY;
  readonly lane = CCIP_LANE;
  readonly #tokens: readonly EvmTokenConfig[];
  readonly #ccip: CcipConfig;

  constructor(opts: CcipFeeApprovalOptions) {
    super(opts);
    this.#tokens = opts.tokens;
    this.#ccip = opts.ccip;
  }

  #resolve(ctx: ExecutionContext): Parsed<Pinned> {
    const invalid = (detail: string) => ({ ok: false, code: 'CCIP_INVALID_CONFIG', detail }) as const;
    const a = ctx.node_config.token_approval as Record<string, unknown> | undefined;
    if (!a || typeof a !== 'object') return invalid('the fee approval names no config.token_approval');
    if (a.spender !== 'ccip.router') return invalid('config.token_approval.spender must be "ccip.router": a fee approval allows only the chain\'s Router');
    const symbol = a.token;
    if (typeof symbol !== 'string' || !(this.#ccip.fee_tokens ?? []).includes(symbol)) return invalid(`config.token_approval.token ${JSON.stringify(symbol)} is not one of ccip.fee_tokens`);
    const listed = this.#tokens.find((t) => t.chain_id === this.chain.chainId && t.symbol === symbol);
    if (!listed || listed.decimals === undefined) return invalid(`fee token ${symbol} is not listed with its decimals in evm.tokens for ${this.chain.label}`);
    const source = this.#ccip.chains.find((c) => c.chain_id === this.chain.chainId);
    if (!source) return { ok: false, code: 'CCIP_CHAIN_NOT_CONFIGURED', detail: `${this.chain.label} has no ccip entry` };
    const amount = toBaseUnits(String(a.amount ?? ''), listed.decimals);
    if (!amount.ok) return invalid(`config.token_approval.amount: ${amount.detail}`);
    if (amount.value === 0n) return invalid('config.token_approval.amount is zero');
    return { ok: true, value: { token: getAddress(listed.address), spender: getAddress(source.router), amount: amount.value } };
  }

  protected async check(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const r = this.#resolve(ctx);
    if (!r.ok) return failed(r.code, r.detail);
    const code = await this.tx.read('eth_getCode', () => this.chain.client.getCode({ address: r.value.token }));
    if (!code || code === '0x') return failed('CCIP_CONTRACT_MISSING', `${this.chain.label} has no fee token contract at ${r.value.token}`);
    return null;
  }

  protected async call(ctx: ExecutionContext): Promise<Parsed<ContractCall>> {
    const r = this.#resolve(ctx);
    if (!r.ok) return r;
    const v = r.value;
    return {
      ok: true,
      value: {
        to: v.token,
        data: encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [v.spender, v.amount] }),
        hints: { to: v.token.toLowerCase(), token: v.token.toLowerCase(), spender: v.spender.toLowerCase(), amount_base_units: v.amount.toString() },
        reverts: (detail) => failed('CCIP_FEE_APPROVAL_WOULD_REVERT', `approve of ${v.amount} to the Router ${v.spender} reverts: ${detail}`),
      },
    };
  }

  protected pinned(ctx: ExecutionContext): Parsed<Pinned> {
    const h = firstHints(ctx);
    if (typeof h.token !== 'string' || typeof h.spender !== 'string' || typeof h.amount_base_units !== 'string') return { ok: false, code: 'CCIP_NO_PREPARED_ACTION', detail: 'the attempt has no prepared approval' };
    return { ok: true, value: { token: h.token as Address, spender: h.spender as Address, amount: BigInt(h.amount_base_units) } };
  }

  protected receiptCheck(p: Pinned): ReceiptCheck {
    return (receipt: TransactionReceipt, proof: Record<string, unknown>) => {
      const approvals = parseEventLogs({ abi: erc20Abi, eventName: 'Approval', logs: receipt.logs, strict: true }).filter(
        (l) => l.address.toLowerCase() === p.token.toLowerCase() && l.args.owner.toLowerCase() === this.from.toLowerCase() && l.args.spender.toLowerCase() === p.spender.toLowerCase() && l.args.value === p.amount,
      );
      if (approvals.length === 1) {
        proof.allowance = p.amount.toString();
        return null;
      }
      return result({
        next_state: 'UNKNOWN',
        provider_state: 'mined_without_approval',
        provider_refs: { tx_hash: proof.tx_hash },
        proof,
        error_code: 'CCIP_APPROVAL_EVENT_MISSING',
        error_detail: `transaction ${String(proof.tx_hash)} succeeded without the one expected Approval`,
        manual_intervention_required: true,
      });
    };
  }
}
