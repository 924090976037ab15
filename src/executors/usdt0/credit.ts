import { isAddress, type Address, type Hex } from 'viem';
import type { EvmChains } from '../evm/chains.ts';
import { manual, result } from '../evm/tx-lifecycle.ts';
import { scanBlocks, secondsLate, WatchObserver, watchStartBlock, type WatchSpec } from '../evm/watch-observer.ts';
import { TemporaryMovementError } from '../errors.ts';
import type { ExecutionContext, ExecutionResult } from '../protocol.ts';
import { USDT0_CREDIT_KEY, USDT0_LANE } from './common.ts';
import type { Usdt0Config } from './config.ts';
import { oftAbi } from './oft.ts';

/** What the watch pins: the packet's GUID, where and to whom it is credited, how much, and since when. */
interface Watch {
  guid: Hex;
  destination_chain_id: number;
  oft: Address;
  recipient: Address;
  amount_base_units: string;
  source_eid: number;
  source_chain_id: number | null;
  source_block_number: number | null;
  /** The destination block the search starts at (the head at prepare, less the lookback). */
  from_block: number;
  delivery_timeout_seconds: number;
}

/** Blocks before the destination's head at prepare where the search for OFTReceived starts: the credit may come first. */
export const CREDIT_LOOKBACK_BLOCKS = 10_000n;

/**
 * `exec.observe.usdt0_credit`: waits until the destination OFT emits OFTReceived with the send's
 * GUID (topic1 of both OFTSent and OFTReceived), crediting the approved recipient the amount the
 * source sent, with the destination chain's confirmations. Until then it keeps observing; past the
 * delivery timeout it says so (USDT0_DELIVERY_LATE) and still keeps observing, since the tokens left
 * the source and the packet can still be delivered, and a second send would pay twice. A credit to
 * another address or of another amount under the GUID needs a person. Reads only.
 */
export class Usdt0CreditObserver extends WatchObserver<Omit<Watch, 'from_block'>, Watch> {
  readonly executorKey = USDT0_CREDIT_KEY;
  readonly lane = USDT0_LANE;
  protected readonly watchNames = { prefix: 'USDT0', kind: 'usdt0-credit', noun: 'credit watch' };
  readonly #cfg: Usdt0Config;
  readonly #chains: EvmChains;

  constructor(cfg: Usdt0Config, chains: EvmChains) {
    super();
    this.#cfg = cfg;
    this.#chains = chains;
  }

  protected async start(spec: Omit<Watch, 'from_block'>): Promise<{ ok: true; watch: Watch }> {
    const chain = this.#chains.get(spec.destination_chain_id)!;
    try {
      return { ok: true, watch: { ...spec, from_block: await watchStartBlock(chain, CREDIT_LOOKBACK_BLOCKS) } };
    } catch (err) {
      throw new TemporaryMovementError('USDT0_RPC_UNAVAILABLE', `${chain.label} did not answer eth_blockNumber: ${(err as Error).message.split('\n')[0]}`);
    }
  }

  protected isWatch(w: Record<string, unknown>): boolean {
    return typeof w.guid === 'string' && typeof w.oft === 'string' && typeof w.recipient === 'string' && typeof w.amount_base_units === 'string' && typeof w.from_block === 'number';
  }

  protected async observeWatch(_ctx: ExecutionContext, w: Watch): Promise<ExecutionResult> {
    const chain = this.#chains.get(w.destination_chain_id);
    if (!chain) return manual('USDT0_CHAIN_NOT_CONFIGURED', `chain ${w.destination_chain_id} is no longer configured`);
    const refs: Record<string, unknown> = { guid: w.guid, destination_chain_id: w.destination_chain_id, recipient: w.recipient, amount_base_units: w.amount_base_units };
    const waiting = (state: string, extra: Record<string, unknown> = {}) =>
      result({ next_state: 'OBSERVING', provider_state: state, provider_refs: refs, retry_after_seconds: this.poll(), ...extra });
    let head: bigint;
    let logs: Array<{ blockNumber: bigint; transactionHash: Hex; logIndex: number; args: { guid: Hex; srcEid: number; toAddress: Address; amountReceivedLD: bigint } }>;
    try {
      head = await chain.client.getBlockNumber();
      logs = await scanBlocks(BigInt(w.from_block), head, this.#cfg.log_block_range, (fromBlock, toBlock) =>
        chain.client.getContractEvents({ address: w.oft, abi: oftAbi, eventName: 'OFTReceived', args: { guid: w.guid }, fromBlock, toBlock, strict: true }) as never,
      );
    } catch (err) {
      return waiting('unavailable', { error_code: 'USDT0_RPC_UNAVAILABLE', error_detail: `${chain.label}: ${(err as Error).message.split('\n')[0]}` });
    }
    const log = logs[0];
    if (!log) {
      const late = await secondsLate(this.#chains, w);
      return late === null
        ? waiting('in_flight')
        : waiting('delivery_late', {
            error_code: 'USDT0_DELIVERY_LATE',
            error_detail: `packet ${w.guid} is not delivered ${late} s after the send (delivery timeout ${w.delivery_timeout_seconds} s); still observing: the tokens left the source, and a second send would pay twice`,
          });
    }
    const credit = {
      credit_tx_hash: log.transactionHash,
      credit_block_number: Number(log.blockNumber),
      credit_log_index: log.logIndex,
      credited_to: log.args.toAddress.toLowerCase(),
      amount_received_base_units: log.args.amountReceivedLD.toString(),
      src_eid: log.args.srcEid,
    };
    if (logs.length > 1 || credit.credited_to !== w.recipient || credit.amount_received_base_units !== w.amount_base_units || credit.src_eid !== w.source_eid) {
      return result({
        next_state: 'UNKNOWN',
        provider_state: 'credit_mismatch',
        provider_refs: { ...refs, ...credit },
        proof: credit,
        error_code: 'USDT0_CREDIT_MISMATCH',
        error_detail: `OFTReceived for ${w.guid} credits ${credit.amount_received_base_units} to ${credit.credited_to} from eid ${credit.src_eid} (${logs.length} events); the send was ${w.amount_base_units} to ${w.recipient} from eid ${w.source_eid}`,
        manual_intervention_required: true,
      });
    }
    const depth = Number(head - log.blockNumber) + 1;
    if (depth < chain.confirmations) return waiting('credited_unconfirmed', { provider_refs: { ...refs, ...credit, confirmations: depth } });
    return result({ next_state: 'COMPLETED', provider_state: 'credited', provider_refs: { ...refs, ...credit }, proof: { ...credit, guid: w.guid, confirmations: depth } });
  }

  async health(): Promise<Record<string, unknown>> {
    return { ok: true, executor_key: this.executorKey, lane: this.lane, deployments: this.#cfg.deployments.length };
  }

  protected poll(): number {
    return Math.max(1, Math.round(this.#cfg.poll_seconds));
  }

  /** From the node config, else the send's provider_refs (provider_context). */
  protected spec(ctx: ExecutionContext): WatchSpec<Omit<Watch, 'from_block'>> {
    const cfg = ctx.node_config;
    const p = ctx.provider_context;
    const bad = (detail: string) => ({ ok: false, code: 'USDT0_INVALID_CONFIG', detail }) as const;
    const guid = cfg.guid ?? p.guid;
    if (typeof guid !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(guid)) return bad(`guid ${JSON.stringify(guid ?? null)} is not a bytes32 (config.guid, or a preceding send)`);
    const chainId = Number(cfg.destination_chain_id ?? p.destination_chain_id);
    const deployment = this.#cfg.deployments.find((d) => d.chain_id === chainId);
    if (!deployment || !this.#chains.get(chainId)) return { ok: false, code: 'USDT0_CHAIN_NOT_CONFIGURED', detail: `destination chain ${String(cfg.destination_chain_id ?? p.destination_chain_id ?? null)} has no usdt0 deployment on a configured chain` };
    const recipient = cfg.recipient ?? p.recipient;
    if (typeof recipient !== 'string' || !isAddress(recipient, { strict: false })) return bad(`recipient ${JSON.stringify(recipient ?? null)} is not an address (config.recipient, or a preceding send)`);
    const amount = cfg.amount_base_units ?? p.amount_received_base_units ?? p.amount_base_units;
    if (typeof amount !== 'string' || !/^[0-9]+$/.test(amount)) return bad(`amount_base_units ${JSON.stringify(amount ?? null)} is not a whole number (config, or a preceding send)`);
    const srcEid = Number(cfg.source_eid ?? p.source_eid);
    if (!Number.isInteger(srcEid) || srcEid <= 0) return bad('source_eid is not an endpoint id (config.source_eid, or a preceding send)');
    const timeout = Number(cfg.delivery_timeout_seconds ?? this.#cfg.delivery_timeout_seconds);
    if (!Number.isFinite(timeout) || timeout <= 0) return bad('delivery_timeout_seconds must be a positive number');
    const num = (v: unknown) => (typeof v === 'number' && Number.isSafeInteger(v) ? v : null);
    return {
      ok: true,
      value: {
        guid: guid.toLowerCase() as Hex,
        destination_chain_id: chainId,
        oft: deployment.oft.toLowerCase() as Address,
        recipient: recipient.toLowerCase() as Address,
        amount_base_units: amount,
        source_eid: srcEid,
        source_chain_id: num(cfg.source_chain_id ?? p.source_chain_id),
        source_block_number: num(cfg.source_block_number ?? p.source_block_number),
        delivery_timeout_seconds: timeout,
      },
    };
  }
}
