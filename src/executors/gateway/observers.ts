import { isAddress, type Address, type Hex } from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import { toBaseUnits } from '../evm/amounts.ts';
import type { EvmChains } from '../evm/chains.ts';
import { failed, manual, preparedWatch, result } from '../evm/tx-lifecycle.ts';
import type { ExecutionContext, ExecutionResult, Executor, PreparedAction } from '../protocol.ts';
import { parseWatch as parseWatchOf, pinnedWatch } from '../watch.ts';
import type { GatewayApiClient } from './api.ts';
import { gatewayWalletAbi } from './codec.ts';
import { GATEWAY_BURN_OBSERVE_KEY, GATEWAY_DEPOSIT_OBSERVE_KEY, GATEWAY_LANE } from './common.ts';
import type { GatewayConfig } from './config.ts';
import { gatewayToken } from './spec.ts';

type Parsed<T> = { ok: true; value: T } | { ok: false; code: string; detail: string };
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
export class GatewayDepositObserver implements Executor {
  readonly executorKey = GATEWAY_DEPOSIT_OBSERVE_KEY;
  readonly lane = GATEWAY_LANE;
  readonly #cfg: GatewayConfig;
  readonly #tokens: readonly EvmTokenConfig[];
  readonly #api: GatewayApiClient;

  constructor(cfg: GatewayConfig, tokens: readonly EvmTokenConfig[], api: GatewayApiClient) {
    this.#cfg = cfg;
    this.#tokens = tokens;
    this.#api = api;
  }

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const w = this.#spec(ctx);
    return w.ok ? null : failed(w.code, w.detail);
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const w = this.#spec(ctx);
    if (!w.ok) return failed(w.code, w.detail);
    return preparedWatch(ctx, 'gateway-credit', JSON.stringify(w.value), { ...w.value });
  }

  async submit(_ctx: ExecutionContext, prepared: PreparedAction): Promise<ExecutionResult> {
    const w = parseCredit(prepared.payload);
    if (!w) return failed('GATEWAY_OBSERVE_SPEC_INVALID', 'the prepared watch cannot be read');
    return result({ next_state: 'SUBMITTED', provider_state: 'watching', provider_refs: { ...w }, retry_after_seconds: poll(this.#cfg) });
  }

  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    const w = pinnedWatch(ctx, parseCredit);
    if (!w) return manual('GATEWAY_NO_PREPARED_ACTION', 'the attempt has no prepared credit watch');
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

  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    if (!pinnedWatch(ctx, parseCredit)) return result({ next_state: 'READY', error_code: 'GATEWAY_NOTHING_SENT', error_detail: 'a credit watch has no side effect' });
    return this.observe(ctx);
  }

  inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.recover(ctx);
  }

  async health(): Promise<Record<string, unknown>> {
    return { ok: true, executor_key: this.executorKey, lane: this.lane };
  }

  #spec(ctx: ExecutionContext): Parsed<CreditWatch> {
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
export class GatewayBurnObserver implements Executor {
  readonly executorKey = GATEWAY_BURN_OBSERVE_KEY;
  readonly lane = GATEWAY_LANE;
  readonly #cfg: GatewayConfig;
  readonly #chains: EvmChains;

  constructor(cfg: GatewayConfig, chains: EvmChains) {
    this.#cfg = cfg;
    this.#chains = chains;
  }

  async preflight(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const w = this.#spec(ctx);
    return w.ok ? null : failed(w.code, w.detail);
  }

  async prepare(ctx: ExecutionContext): Promise<ExecutionResult> {
    const w = this.#spec(ctx);
    if (!w.ok) return failed(w.code, w.detail);
    const chain = this.#chains.get(w.value.source_chain_id)!;
    let head: bigint;
    try {
      head = await chain.client.getBlockNumber();
    } catch (err) {
      return result({ next_state: 'READY', error_code: 'GATEWAY_RPC_UNAVAILABLE', error_detail: (err as Error).message.split('\n')[0]!, retry_after_seconds: poll(this.#cfg) });
    }
    const watch: BurnWatch = { ...w.value, from_block: Number(head > BURN_LOOKBACK_BLOCKS ? head - BURN_LOOKBACK_BLOCKS : 0n) };
    return preparedWatch(ctx, 'gateway-burn', JSON.stringify(watch), { ...watch });
  }

  async submit(_ctx: ExecutionContext, prepared: PreparedAction): Promise<ExecutionResult> {
    const w = parseBurn(prepared.payload);
    if (!w) return failed('GATEWAY_OBSERVE_SPEC_INVALID', 'the prepared watch cannot be read');
    return result({ next_state: 'SUBMITTED', provider_state: 'watching', provider_refs: { ...w }, retry_after_seconds: poll(this.#cfg) });
  }

  async observe(ctx: ExecutionContext): Promise<ExecutionResult> {
    const w = pinnedWatch(ctx, parseBurn);
    if (!w) return manual('GATEWAY_NO_PREPARED_ACTION', 'the attempt has no prepared burn watch');
    const chain = this.#chains.get(w.source_chain_id);
    if (!chain) return manual('GATEWAY_CHAIN_NOT_CONFIGURED', `chain ${w.source_chain_id} is no longer configured`);
    const refs: Record<string, unknown> = { transfer_spec_hash: w.transfer_spec_hash, source_chain_id: w.source_chain_id, depositor: w.depositor, amount_base_units: w.amount_base_units };
    const waiting = (state: string, extra: Record<string, unknown> = {}) => result({ next_state: 'OBSERVING', provider_state: state, provider_refs: refs, retry_after_seconds: poll(this.#cfg), ...extra });
    let head: bigint;
    const logs: Array<{ blockNumber: bigint; transactionHash: Hex; logIndex: number; args: { depositor: Address; value: bigint; fee: bigint } }> = [];
    try {
      head = await chain.client.getBlockNumber();
      const step = BigInt(this.#cfg.log_block_range);
      for (let from = BigInt(w.from_block); from <= head; from += step) {
        const to = from + step - 1n < head ? from + step - 1n : head;
        const found = await chain.client.getContractEvents({ address: w.wallet, abi: gatewayWalletAbi, eventName: 'GatewayBurned', args: { transferSpecHash: w.transfer_spec_hash }, fromBlock: from, toBlock: to, strict: true });
        for (const l of found) logs.push(l as never);
      }
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

  async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    if (!pinnedWatch(ctx, parseBurn)) return result({ next_state: 'READY', error_code: 'GATEWAY_NOTHING_SENT', error_detail: 'a burn watch has no side effect' });
    return this.observe(ctx);
  }

  inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.recover(ctx);
  }

  async health(): Promise<Record<string, unknown>> {
    return { ok: true, executor_key: this.executorKey, lane: this.lane, chains: this.#cfg.chains.length };
  }

  #spec(ctx: ExecutionContext): Parsed<Omit<BurnWatch, 'from_block'>> {
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

function parseCredit(payload: string | null): CreditWatch | null {
  return parseWatchOf<CreditWatch>(payload, (w) => typeof w.depositor === 'string' && typeof w.domain === 'number' && typeof w.amount_base_units === 'string' && typeof w.decimals === 'number');
}

function parseBurn(payload: string | null): BurnWatch | null {
  return parseWatchOf<BurnWatch>(payload, (w) => typeof w.transfer_spec_hash === 'string' && typeof w.wallet === 'string' && typeof w.from_block === 'number' && typeof w.amount_base_units === 'string');
}
