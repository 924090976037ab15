import { isAddress, type Address, type Hex } from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import { toBaseUnits } from '../evm/amounts.ts';
import type { EvmChains } from '../evm/chains.ts';
import { manual, result } from '../evm/tx-lifecycle.ts';
import { scanBlocks, WatchObserver, watchStartBlock, type WatchSpec } from '../evm/watch-observer.ts';
import type { ExecutionContext, ExecutionResult } from '../protocol.ts';
import type { GatewayApiClient } from './api.ts';
import { gatewayWalletAbi } from './codec.ts';
import { GATEWAY_BURN_OBSERVE_KEY, GATEWAY_DEPOSIT_OBSERVE_KEY, GATEWAY_LANE } from './common.ts';
import type { GatewayConfig } from './config.ts';
import { gatewayToken } from './spec.ts';

const bad = (detail: string) => ({ ok: false, code: 'GATEWAY_INVALID_CONFIG', detail }) as const;

interface CreditWatch {
  depositor: Address;
  domain: number;
  chain_id: number;
  /** The least available balance that counts the deposit as credited, base units. */
  amount_base_units: string;
  decimals: number;
}

/**
 * `exec.observe.gateway_deposit`: waits until Gateway counts a deposit in the depositor's unified
 * balance: `POST /v1/balances` for the depositor on the deposit's domain must show at least the
 * amount (Gateway counts finalized deposits only: minutes on Ethereum, seconds elsewhere). The
 * depositor, domain and amount come from the preceding deposit (or config). Reads only.
 */
export class GatewayDepositObserver extends WatchObserver<CreditWatch, CreditWatch> {
  readonly executorKey = GATEWAY_DEPOSIT_OBSERVE_KEY;
  readonly lane = GATEWAY_LANE;
  protected readonly watchNames = { prefix: 'GATEWAY', kind: 'gateway-credit', noun: 'credit watch' };
  readonly #cfg: GatewayConfig;
  readonly #tokens: readonly EvmTokenConfig[];
  readonly #api: GatewayApiClient;

  constructor(cfg: GatewayConfig, tokens: readonly EvmTokenConfig[], api: GatewayApiClient) {
    super();
    this.#cfg = cfg;
    this.#tokens = tokens;
    this.#api = api;
  }

  protected async start(spec: CreditWatch): Promise<{ ok: true; watch: CreditWatch }> {
    return { ok: true, watch: spec };
  }

  protected isWatch(w: Record<string, unknown>): boolean {
    return typeof w.depositor === 'string' && typeof w.domain === 'number' && typeof w.amount_base_units === 'string' && typeof w.decimals === 'number';
  }

  protected poll(): number {
    return poll(this.#cfg);
  }

  protected async observeWatch(_ctx: ExecutionContext, w: CreditWatch): Promise<ExecutionResult> {
    const refs = { ...w };
    const waiting = (state: string, extra: Record<string, unknown> = {}) => result({ next_state: 'OBSERVING', provider_state: state, provider_refs: refs, retry_after_seconds: poll(this.#cfg), ...extra });
    const answer = await this.#api.balances(w.depositor, w.domain);
    if (answer.kind !== 'ok') return waiting('unavailable', { error_code: answer.kind === 'refused' ? 'GATEWAY_BALANCES_REFUSED' : 'GATEWAY_API_UNAVAILABLE', error_detail: answer.kind === 'refused' ? answer.message : answer.detail });
    const entry = ((answer.body as { balances?: unknown }).balances as Array<{ domain?: unknown; balance?: unknown }> | undefined)?.find((b) => b?.domain === w.domain);
    const text = typeof entry?.balance === 'string' ? entry.balance : null;
    const base = text === null ? null : toBaseUnits(text, w.decimals);
    if (!base || !base.ok) return waiting('balance_unreadable', { error_code: 'GATEWAY_ANSWER_INVALID', error_detail: `no readable balance for domain ${w.domain} in Gateway's answer` });
    if (base.value < BigInt(w.amount_base_units)) return waiting('not_credited', { provider_refs: { ...refs, available_base_units: base.value.toString() } });
    return result({ next_state: 'COMPLETED', provider_state: 'credited', provider_refs: { ...refs, available_base_units: base.value.toString() }, proof: { available_base_units: base.value.toString(), domain: w.domain } });
  }

  async health(): Promise<Record<string, unknown>> {
    return { ok: true, executor_key: this.executorKey, lane: this.lane };
  }

  protected spec(ctx: ExecutionContext): WatchSpec<CreditWatch> {
    const cfg = ctx.node_config;
    const p = ctx.provider_context;
    const depositor = cfg.depositor ?? p.depositor;
    if (typeof depositor !== 'string' || !isAddress(depositor, { strict: false })) return bad('depositor is not an address (config.depositor, or a preceding deposit)');
    const chainId = Number(cfg.chain_id ?? p.source_chain_id);
    const entry = this.#cfg.chains.find((c) => c.chain_id === chainId);
    if (!entry) return { ok: false, code: 'GATEWAY_CHAIN_NOT_CONFIGURED', detail: `chain ${String(cfg.chain_id ?? p.source_chain_id ?? null)} has no gateway entry` };
    const token = gatewayToken(this.#cfg, chainId, this.#tokens);
    if (!token.ok) return token;
    const amount = cfg.amount_base_units ?? p.amount_base_units;
    if (typeof amount !== 'string' || !/^[0-9]+$/.test(amount)) return bad('amount_base_units is not a whole number (config, or a preceding deposit)');
    return { ok: true, value: { depositor: depositor.toLowerCase() as Address, domain: entry.domain, chain_id: chainId, amount_base_units: amount, decimals: token.value.decimals } };
  }
}

interface BurnWatch {
  transfer_spec_hash: Hex;
  source_chain_id: number;
  wallet: Address;
  depositor: Address;
  amount_base_units: string;
  from_block: number;
}

/** Source blocks before the head at prepare where the search for GatewayBurned starts (the burn may come first). */
export const BURN_LOOKBACK_BLOCKS = 10_000n;

/**
 * `exec.observe.gateway_burn`: waits for the source GatewayWallet's GatewayBurned of the transfer
 * spec hash (the preceding burn intent's): the value and fee taken from the depositor's balance,
 * with the source chain's confirmations. The value must be the intent's. Reads only.
 */
export class GatewayBurnObserver extends WatchObserver<Omit<BurnWatch, 'from_block'>, BurnWatch> {
  readonly executorKey = GATEWAY_BURN_OBSERVE_KEY;
  readonly lane = GATEWAY_LANE;
  protected readonly watchNames = { prefix: 'GATEWAY', kind: 'gateway-burn', noun: 'burn watch' };
  readonly #cfg: GatewayConfig;
  readonly #chains: EvmChains;

  constructor(cfg: GatewayConfig, chains: EvmChains) {
    super();
    this.#cfg = cfg;
    this.#chains = chains;
  }

  protected async start(spec: Omit<BurnWatch, 'from_block'>): Promise<{ ok: true; watch: BurnWatch } | { ok: false; result: ExecutionResult }> {
    const chain = this.#chains.get(spec.source_chain_id)!;
    try {
      return { ok: true, watch: { ...spec, from_block: await watchStartBlock(chain, BURN_LOOKBACK_BLOCKS) } };
    } catch (err) {
      return { ok: false, result: result({ next_state: 'READY', error_code: 'GATEWAY_RPC_UNAVAILABLE', error_detail: (err as Error).message.split('\n')[0]!, retry_after_seconds: poll(this.#cfg) }) };
    }
  }

  protected isWatch(w: Record<string, unknown>): boolean {
    return typeof w.transfer_spec_hash === 'string' && typeof w.wallet === 'string' && typeof w.from_block === 'number' && typeof w.amount_base_units === 'string';
  }

  protected poll(): number {
    return poll(this.#cfg);
  }

  protected async observeWatch(_ctx: ExecutionContext, w: BurnWatch): Promise<ExecutionResult> {
    const chain = this.#chains.get(w.source_chain_id);
    if (!chain) return manual('GATEWAY_CHAIN_NOT_CONFIGURED', `chain ${w.source_chain_id} is no longer configured`);
    const refs: Record<string, unknown> = { transfer_spec_hash: w.transfer_spec_hash, source_chain_id: w.source_chain_id, depositor: w.depositor, amount_base_units: w.amount_base_units };
    const waiting = (state: string, extra: Record<string, unknown> = {}) => result({ next_state: 'OBSERVING', provider_state: state, provider_refs: refs, retry_after_seconds: poll(this.#cfg), ...extra });
    let head: bigint;
    let logs: Array<{ blockNumber: bigint; transactionHash: Hex; logIndex: number; args: { depositor: Address; value: bigint; fee: bigint } }>;
    try {
      head = await chain.client.getBlockNumber();
      logs = await scanBlocks(BigInt(w.from_block), head, this.#cfg.log_block_range, (fromBlock, toBlock) =>
        chain.client.getContractEvents({ address: w.wallet, abi: gatewayWalletAbi, eventName: 'GatewayBurned', args: { transferSpecHash: w.transfer_spec_hash }, fromBlock, toBlock, strict: true }) as never,
      );
    } catch (err) {
      return waiting('unavailable', { error_code: 'GATEWAY_RPC_UNAVAILABLE', error_detail: `${chain.label}: ${(err as Error).message.split('\n')[0]}` });
    }
    const log = logs[0];
    if (!log) return waiting('not_burned');
    const burn = { burn_tx_hash: log.transactionHash, burn_block_number: Number(log.blockNumber), burn_log_index: log.logIndex, burned_base_units: log.args.value.toString(), fee_base_units: log.args.fee.toString() };
    if (log.args.value.toString() !== w.amount_base_units || log.args.depositor.toLowerCase() !== w.depositor) {
      return result({
        next_state: 'UNKNOWN',
        provider_state: 'burn_mismatch',
        provider_refs: { ...refs, ...burn },
        error_code: 'GATEWAY_BURN_MISMATCH',
        error_detail: `GatewayBurned of ${w.transfer_spec_hash} burns ${log.args.value} from ${log.args.depositor}, the intent ${w.amount_base_units} from ${w.depositor}`,
        manual_intervention_required: true,
      });
    }
    const depth = Number(head - log.blockNumber) + 1;
    if (depth < chain.confirmations) return waiting('burned_unconfirmed', { provider_refs: { ...refs, ...burn, confirmations: depth } });
    return result({ next_state: 'COMPLETED', provider_state: 'burned', provider_refs: { ...refs, ...burn }, proof: { ...burn, confirmations: depth } });
  }

  async health(): Promise<Record<string, unknown>> {
    return { ok: true, executor_key: this.executorKey, lane: this.lane, chains: this.#cfg.chains.length };
  }

  protected spec(ctx: ExecutionContext): WatchSpec<Omit<BurnWatch, 'from_block'>> {
    const cfg = ctx.node_config;
    const p = ctx.provider_context;
    const hash = cfg.transfer_spec_hash ?? p.transfer_spec_hash;
    if (typeof hash !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(hash)) return bad('transfer_spec_hash is not a bytes32 (config, or a preceding burn intent)');
    const chainId = Number(cfg.source_chain_id ?? p.source_chain_id);
    const entry = this.#cfg.chains.find((c) => c.chain_id === chainId);
    if (!entry || !this.#chains.get(chainId)) return { ok: false, code: 'GATEWAY_CHAIN_NOT_CONFIGURED', detail: `source chain ${String(cfg.source_chain_id ?? p.source_chain_id ?? null)} has no gateway entry on a configured chain` };
    const depositor = cfg.depositor ?? p.depositor;
    if (typeof depositor !== 'string' || !isAddress(depositor, { strict: false })) return bad('depositor is not an address (config, or a preceding burn intent)');
    const amount = cfg.amount_base_units ?? p.amount_base_units;
    if (typeof amount !== 'string' || !/^[0-9]+$/.test(amount)) return bad('amount_base_units is not a whole number (config, or a preceding burn intent)');
    return { ok: true, value: { transfer_spec_hash: hash.toLowerCase() as Hex, source_chain_id: chainId, wallet: entry.wallet.toLowerCase() as Address, depositor: depositor.toLowerCase() as Address, amount_base_units: amount } };
  }
}

function poll(cfg: GatewayConfig): number {
  return Math.max(1, Math.round(cfg.poll_seconds));
}
