import { ContractFunctionExecutionError, erc20Abi, isHex, type Address, type Hex } from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import type { ExecutionContext, ExecutionResult, Executor, PreparedAction } from '../protocol.ts';
import { fromBaseUnits, toBaseUnits } from './amounts.ts';
import type { EvmChain } from './chains.ts';
import { EVM_LANE } from './native-transfer.ts';
import { errorDetail } from './rpc-errors.ts';
import { addressOf, amountOf, confirmationsOf, refuse, tokenOf, type Parsed } from './token-config.ts';
import { EvmTxLifecycle, failed, finalityOf, manual, preparedWatch, receiptOrNull, receiptProof, result } from './tx-lifecycle.ts';

/**
 * Observe-only executors of the EVM lane (the probes of the executor protocol): they never sign
 * or send anything. prepare() pins what to watch in the prepared action (a JSON payload, no
 * signing), submit() only starts the watch (SUBMITTED), and the observer's observe() calls decide
 * when the condition holds. recover() is observe(): there is no side effect to be unsure about.
 */

export const EVM_BALANCE_OBSERVE_KEY = 'exec.observe.evm_balance';
export const EVM_FINALITY_OBSERVE_KEY = 'exec.observe.evm_finality';

abstract class ObserveOnly<Spec> implements Executor {
  readonly lane = EVM_LANE;
  protected readonly tx: EvmTxLifecycle;

  constructor(
    readonly executorKey: string,
    readonly chain: EvmChain,
  ) {
    this.tx = new EvmTxLifecycle(chain.client, chain.pollSeconds);
  }

  /** Reads the node's settings and pins them; a refusal fails the node at preflight. */
  protected abstract spec(ctx: ExecutionContext): Promise<Parsed<Spec>>;
  protected abstract check(spec: Spec): Promise<ExecutionResult>;
  protected abstract refs(spec: Spec): Record<string, unknown>;

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const chainId = await this.tx.read('eth_chainId', () => this.chain.client.getChainId());
    if (chainId !== this.chain.chainId) return failed('EVM_CHAIN_MISMATCH', `${this.chain.label}: the RPC serves chain ${chainId}`);
    const s = await this.spec(ctx);
    return s.ok ? null : failed(s.code, s.detail);
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const s = await this.spec(ctx);
    if (!s.ok) return failed(s.code, s.detail);
    const payload = JSON.stringify(s.value, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
    return preparedWatch(ctx, 'evm-observe', payload, { chain_id: this.chain.chainId, ...this.refs(s.value) });
  }

  async submit(_ctx: ExecutionContext, prepared: PreparedAction): Promise<ExecutionResult> {
    const spec = this.#parse(prepared.payload);
    if (!spec) return failed('EVM_OBSERVE_SPEC_INVALID', 'the prepared watch cannot be read');
    return result({
      next_state: 'SUBMITTED',
      provider_state: 'watching',
      provider_refs: { chain_id: this.chain.chainId, ...this.refs(spec) },
      retry_after_seconds: Math.round(this.chain.pollSeconds),
    });
  }

  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    const spec = this.#pinned(ctx);
    if (!spec) return manual('EVM_NO_PREPARED_ACTION', 'the attempt has no prepared watch');
    return this.check(spec);
  }

  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    // Nothing was ever sent: without a pinned watch the node may simply start over.
    if (!this.#pinned(ctx)) return result({ next_state: 'READY', error_code: 'EVM_NOTHING_BROADCAST', error_detail: 'an observe node has no side effect' });
    return this.observe(ctx);
  }

  /** A watch has no side effect: recover() only reads already. */
  inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.recover(ctx);
  }

  async health(): Promise<Record<string, unknown>> {
    const [chainId, blockNumber] = await Promise.all([this.chain.client.getChainId(), this.chain.client.getBlockNumber()]);
    return { ok: true, executor_key: this.executorKey, lane: EVM_LANE, chain_id: chainId, block_number: Number(blockNumber) };
  }

  protected waiting(state: string, refs: Record<string, unknown>): ExecutionResult {
    return result({ next_state: 'OBSERVING', provider_state: state, provider_refs: refs, retry_after_seconds: Math.round(this.chain.pollSeconds) });
  }

  #pinned(ctx: ExecutionContext): Spec | null {
    const prepared = [...(ctx.attempt_artifacts ?? [])].reverse().find((a) => a.artifact_type === 'prepared_action' && a.content_inline);
    if (!prepared?.content_inline) return null;
    try {
      return this.#parse((JSON.parse(prepared.content_inline) as PreparedAction).payload);
    } catch {
      return null;
    }
  }

  #parse(payload: string | null): Spec | null {
    if (!payload) return null;
    try {
      return JSON.parse(payload) as Spec;
    } catch {
      return null;
    }
  }
}

/** The balance watch, as pinned (amounts as decimal strings of base units). */
interface BalanceSpec {
  address: Address;
  /** 'native', or the token's lowercase address. */
  asset: string;
  decimals: number;
  /** Completed when the balance is at least this. */
  min_base_units: string;
  /** holds: the balance reaches the amount; receives: the balance grows by the amount over what it was at prepare. */
  mode: 'holds' | 'receives';
  baseline_base_units: string | null;
  confirmations: number;
}

/**
 * `exec.observe.evm_balance`: waits until an address holds at least an amount of a token or of
 * the native coin (a deposit arriving). The balance is read at the block `confirmations - 1`
 * below the head, so a deposit counts only once it is that deep.
 */
export class EvmBalanceObserver extends ObserveOnly<BalanceSpec> {
  readonly #tokens: readonly EvmTokenConfig[];

  constructor(chain: EvmChain, tokens: readonly EvmTokenConfig[], executorKey = EVM_BALANCE_OBSERVE_KEY) {
    super(executorKey, chain);
    this.#tokens = tokens;
  }

  protected async spec(ctx: ExecutionContext): Promise<Parsed<BalanceSpec>> {
    const cfg = ctx.node_config;
    const destination = ctx.intent.destination;
    const rawAddress = cfg.address ?? (destination !== null && typeof destination === 'object' ? (destination as Record<string, unknown>).address : destination);
    const address = addressOf(rawAddress, 'address');
    if (!address.ok) return address;
    const mode = cfg.mode ?? 'holds';
    if (mode !== 'holds' && mode !== 'receives') return refuse('EVM_INVALID_CONFIG', 'mode must be "holds" or "receives"');
    const confirmations = confirmationsOf(cfg, 1);
    if (!confirmations.ok) return confirmations;
    const text = amountOf(ctx);
    if (!text.ok) return text;

    let asset = 'native';
    let decimals = 18;
    if (cfg.token !== undefined && cfg.token !== 'native') {
      const token = tokenOf(cfg, this.chain.chainId, this.#tokens);
      if (!token.ok) return token;
      asset = token.value.address.toLowerCase();
      const onChain = await this.#decimals(token.value.address);
      if (!onChain.ok) return onChain;
      if (token.value.decimals !== null && token.value.decimals !== onChain.value) {
        return refuse('EVM_TOKEN_DECIMALS_MISMATCH', `token ${asset} has ${onChain.value} decimals on ${this.chain.label}, the configuration says ${token.value.decimals}`);
      }
      decimals = onChain.value;
    } else if (cfg.decimals !== undefined && cfg.decimals !== 18) {
      return refuse('EVM_TOKEN_DECIMALS_MISMATCH', 'the native coin has 18 decimals');
    }
    const amount = toBaseUnits(text.value, decimals);
    if (!amount.ok) return refuse('EVM_INVALID_AMOUNT', amount.detail);
    let baseline: bigint | null = null;
    if (mode === 'receives') baseline = await this.tx.read('balance', () => this.#balance(asset, address.value, undefined));
    const min = (baseline ?? 0n) + amount.value;
    return {
      ok: true,
      value: {
        address: address.value.toLowerCase() as Address,
        asset,
        decimals,
        min_base_units: min.toString(),
        mode,
        baseline_base_units: baseline === null ? null : baseline.toString(),
        confirmations: confirmations.value,
      },
    };
  }

  protected refs(s: BalanceSpec): Record<string, unknown> {
    return { watch_address: s.address, asset: s.asset, min_base_units: s.min_base_units };
  }

  protected async check(s: BalanceSpec): Promise<ExecutionResult> {
    return this.tx.read('balance', async () => {
      const head = await this.chain.client.getBlockNumber();
      const depth = BigInt(s.confirmations - 1);
      const at = head >= depth ? head - depth : 0n;
      const balance = await this.#balance(s.asset, s.address, at);
      const refs = { ...this.refs(s), balance_base_units: balance.toString(), block_number: Number(at) };
      if (balance < BigInt(s.min_base_units)) return this.waiting('below', refs);
      const block = await this.chain.client.getBlock({ blockNumber: at });
      return result({
        next_state: 'COMPLETED',
        provider_state: 'reached',
        provider_refs: refs,
        proof: {
          chain_id: this.chain.chainId,
          address: s.address,
          asset: s.asset,
          balance_base_units: balance.toString(),
          balance: fromBaseUnits(balance, s.decimals),
          min_base_units: s.min_base_units,
          block_number: Number(at),
          block_hash: block.hash,
        },
      });
    });
  }

  async #balance(asset: string, address: Address, blockNumber: bigint | undefined): Promise<bigint> {
    if (asset === 'native') return this.chain.client.getBalance({ address, blockNumber });
    return this.chain.client.readContract({ address: asset as Address, abi: erc20Abi, functionName: 'balanceOf', args: [address], blockNumber });
  }

  async #decimals(address: Address): Promise<Parsed<number>> {
    const code = await this.tx.read('eth_getCode', () => this.chain.client.getCode({ address }));
    if (!code || code === '0x') return refuse('EVM_INVALID_TOKEN', `${this.chain.label} has no contract at ${address}`);
    try {
      return { ok: true, value: await this.chain.client.readContract({ address, abi: erc20Abi, functionName: 'decimals' }) };
    } catch (err) {
      if (err instanceof ContractFunctionExecutionError) return refuse('EVM_INVALID_TOKEN', `${address} does not answer decimals(): ${errorDetail(err)}`);
      return this.tx.read('decimals', () => Promise.reject(err));
    }
  }
}

interface FinalitySpec {
  tx_hash: Hex;
  confirmations: number;
  finalized: boolean;
}

/**
 * `exec.observe.evm_finality`: waits until a transaction (node config `tx_hash`, which may be a
 * `$ref` to a predecessor's result, else the predecessors' `tx_hash`) has N confirmations, or is
 * covered by the chain's `finalized` block. Every look starts from the chain as it is: a receipt
 * that a reorg took away, or whose block is no longer canonical, sends the node back to waiting.
 * A reverted transaction fails the node with its receipt as proof.
 */
export class EvmFinalityObserver extends ObserveOnly<FinalitySpec> {
  constructor(chain: EvmChain, executorKey = EVM_FINALITY_OBSERVE_KEY) {
    super(executorKey, chain);
  }

  protected async spec(ctx: ExecutionContext): Promise<Parsed<FinalitySpec>> {
    const cfg = ctx.node_config;
    const raw = cfg.tx_hash ?? ctx.provider_context.tx_hash;
    if (typeof raw !== 'string' || !isHex(raw, { strict: true }) || raw.length !== 66) {
      return refuse('EVM_INVALID_TX_HASH', `tx_hash ${JSON.stringify(raw ?? null)} is not a 32-byte 0x hash`);
    }
    const confirmations = confirmationsOf(cfg, this.chain.confirmations);
    if (!confirmations.ok) return confirmations;
    const finality = cfg.finality ?? this.chain.finality;
    if (finality !== 'confirmations' && finality !== 'finalized') return refuse('EVM_INVALID_CONFIG', 'finality must be "confirmations" or "finalized"');
    return { ok: true, value: { tx_hash: raw.toLowerCase() as Hex, confirmations: confirmations.value, finalized: finality === 'finalized' } };
  }

  protected refs(s: FinalitySpec): Record<string, unknown> {
    return { tx_hash: s.tx_hash };
  }

  protected async check(s: FinalitySpec): Promise<ExecutionResult> {
    return this.tx.read('lookup', async () => {
      const receipt = await receiptOrNull(this.chain.client, s.tx_hash);
      if (!receipt) {
        const pending = await this.tx.pending(s.tx_hash);
        return this.waiting(pending ? 'pending' : 'not_found', { ...this.refs(s), confirmations: 0 });
      }
      const proof = receiptProof(s.tx_hash, receipt);
      if (receipt.status !== 'success') {
        return result({
          next_state: 'FAILED',
          provider_state: 'reverted',
          provider_refs: this.refs(s),
          proof,
          error_code: 'EVM_TX_REVERTED',
          error_detail: `transaction ${s.tx_hash} reverted in block ${receipt.blockNumber}`,
        });
      }
      const reached = await finalityOf(this.chain.client, receipt, s);
      const refs = { ...this.refs(s), block_number: Number(receipt.blockNumber), confirmations: reached.confirmations };
      if (!reached.done) return this.waiting(reached.canonical ? 'mined' : 'reorged', refs);
      return result({
        next_state: 'COMPLETED',
        provider_state: s.finalized ? 'finalized' : 'confirmed',
        provider_refs: refs,
        proof: { ...proof, confirmations: reached.confirmations, ...(s.finalized ? { finalized: true } : {}) },
      });
    });
  }
}
