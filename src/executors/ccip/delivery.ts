import { isAddress, type Address, type Hex } from 'viem';
import type { EvmChains } from '../evm/chains.ts';
import { manual, result } from '../evm/tx-lifecycle.ts';
import { scanBlocks, secondsLate, WatchObserver, watchStartBlock, type WatchSpec } from '../evm/watch-observer.ts';
import { TemporaryMovementError } from '../errors.ts';
import type { ExecutionContext, ExecutionResult } from '../protocol.ts';
import { CCIP_DELIVERY_KEY, CCIP_LANE } from './common.ts';
import type { CcipConfig } from './config.ts';
import { EXECUTION_STATES, offRampAbi } from './router.ts';

/** What the watch pins: the message, where it is executed, to whom, how much, and since when. */
interface Watch {
  message_id: Hex;
  sequence_number: string;
  source_chain_selector: string;
  destination_chain_id: number;
  off_ramp: Address;
  recipient: Address;
  amount_base_units: string;
  source_chain_id: number | null;
  source_block_number: number | null;
  /** The destination block the event search starts at (the head at prepare, less the lookback). */
  from_block: number;
  delivery_timeout_seconds: number;
}

/** Blocks before the destination's head at prepare where the search for ExecutionStateChanged starts: the execution may come first. */
export const DELIVERY_LOOKBACK_BLOCKS = 10_000n;

/**
 * `exec.observe.ccip_delivery`: reads the destination OffRamp's execution state of the send's
 * message (getExecutionState(source selector, sequence number)) and its ExecutionStateChanged event
 * under the messageId. SUCCESS, with the destination chain's confirmations, completes the node;
 * FAILURE fails it (CCIP_EXECUTION_FAILED: the receiver reverted and no tokens were delivered; the
 * message waits for a manual execution at Chainlink, never a second send). UNTOUCHED or IN_PROGRESS
 * keeps observing; past the delivery timeout it says so (CCIP_DELIVERY_LATE) and still observes.
 * Reads only.
 */
export class CcipDeliveryObserver extends WatchObserver<Omit<Watch, 'from_block'>, Watch> {
  readonly executorKey = CCIP_DELIVERY_KEY;
  readonly lane = CCIP_LANE;
  protected readonly watchNames = { prefix: 'CCIP', kind: 'ccip-delivery', noun: 'delivery watch' };
  readonly #cfg: CcipConfig;
  readonly #chains: EvmChains;

  constructor(cfg: CcipConfig, chains: EvmChains) {
    super();
    this.#cfg = cfg;
    this.#chains = chains;
  }

  protected async start(spec: Omit<Watch, 'from_block'>): Promise<{ ok: true; watch: Watch }> {
    const chain = this.#chains.get(spec.destination_chain_id)!;
    try {
      return { ok: true, watch: { ...spec, from_block: await watchStartBlock(chain, DELIVERY_LOOKBACK_BLOCKS) } };
    } catch (err) {
      throw new TemporaryMovementError('CCIP_RPC_UNAVAILABLE', `${chain.label} did not answer eth_blockNumber: ${(err as Error).message.split('\n')[0]}`);
    }
  }

  protected isWatch(w: Record<string, unknown>): boolean {
    return typeof w.message_id === 'string' && typeof w.sequence_number === 'string' && typeof w.off_ramp === 'string' && typeof w.recipient === 'string' && typeof w.from_block === 'number';
  }

  protected async observeWatch(_ctx: ExecutionContext, w: Watch): Promise<ExecutionResult> {
    const chain = this.#chains.get(w.destination_chain_id);
    if (!chain) return manual('CCIP_CHAIN_NOT_CONFIGURED', `chain ${w.destination_chain_id} is no longer configured`);
    const refs: Record<string, unknown> = { message_id: w.message_id, sequence_number: w.sequence_number, destination_chain_id: w.destination_chain_id, recipient: w.recipient, amount_base_units: w.amount_base_units };
    const waiting = (state: string, extra: Record<string, unknown> = {}) =>
      result({ next_state: 'OBSERVING', provider_state: state, provider_refs: refs, retry_after_seconds: this.poll(), ...extra });
    const src = BigInt(w.source_chain_selector);
    const seq = BigInt(w.sequence_number);
    let state: number;
    let head: bigint;
    let logs: Array<{ blockNumber: bigint; transactionHash: Hex; logIndex: number; args: { messageId: Hex; state: number; returnData: Hex } }> = [];
    try {
      state = await chain.client.readContract({ address: w.off_ramp, abi: offRampAbi, functionName: 'getExecutionState', args: [src, seq] });
      if (state === 2 || state === 3) {
        head = await chain.client.getBlockNumber();
        logs = await scanBlocks(BigInt(w.from_block), head, this.#cfg.log_block_range, (fromBlock, toBlock) =>
          chain.client.getContractEvents({
            address: w.off_ramp,
            abi: offRampAbi,
            eventName: 'ExecutionStateChanged',
            args: { sourceChainSelector: src, sequenceNumber: seq },
            fromBlock,
            toBlock,
            strict: true,
          }) as never,
        );
      } else head = 0n;
    } catch (err) {
      return waiting('unavailable', { error_code: 'CCIP_RPC_UNAVAILABLE', error_detail: `${chain.label}: ${(err as Error).message.split('\n')[0]}` });
    }
    const name = EXECUTION_STATES[state] ?? `STATE_${state}`;
    if (state !== 2 && state !== 3) {
      const late = await secondsLate(this.#chains, w);
      return late === null
        ? waiting(name === 'IN_PROGRESS' ? 'in_progress' : 'untouched')
        : waiting('delivery_late', {
            error_code: 'CCIP_DELIVERY_LATE',
            error_detail: `message ${w.message_id} is not executed ${late} s after the send (delivery timeout ${w.delivery_timeout_seconds} s); still observing: the fee is paid and the tokens left the source, and a second send would pay twice`,
          });
    }
    // The last state change of (source, sequence number) is the one the state read shows; it must carry the send's messageId.
    const log = logs.at(-1);
    if (!log || log.args.messageId.toLowerCase() !== w.message_id || log.args.state !== state) {
      return result({
        next_state: 'UNKNOWN',
        provider_state: 'execution_mismatch',
        provider_refs: { ...refs, execution_state: name, logged_message_id: log?.args.messageId ?? null },
        error_code: 'CCIP_MESSAGE_ID_MISMATCH',
        error_detail: `the OffRamp shows ${name} for sequence number ${w.sequence_number} from selector ${w.source_chain_selector}, but no ExecutionStateChanged with message ${w.message_id} and that state`,
        manual_intervention_required: true,
      });
    }
    const execution = { execution_state: name, execution_tx_hash: log.transactionHash, execution_block_number: Number(log.blockNumber), execution_log_index: log.logIndex };
    if (state === 3) {
      return result({
        next_state: 'FAILED',
        provider_state: 'execution_failed',
        provider_refs: { ...refs, ...execution, return_data: log.args.returnData },
        proof: { ...execution, message_id: w.message_id, return_data: log.args.returnData },
        error_code: 'CCIP_EXECUTION_FAILED',
        error_detail: `message ${w.message_id} was executed on chain ${w.destination_chain_id} and FAILED (return data ${log.args.returnData.slice(0, 138)}): no tokens were delivered; the message can be executed manually at Chainlink, it is never sent again`,
      });
    }
    const depth = Number(head - log.blockNumber) + 1;
    if (depth < chain.confirmations) return waiting('executed_unconfirmed', { provider_refs: { ...refs, ...execution, confirmations: depth } });
    return result({ next_state: 'COMPLETED', provider_state: 'executed', provider_refs: { ...refs, ...execution }, proof: { ...execution, message_id: w.message_id, confirmations: depth } });
  }

  async health(): Promise<Record<string, unknown>> {
    return { ok: true, executor_key: this.executorKey, lane: this.lane, chains: this.#cfg.chains.length };
  }

  protected poll(): number {
    return Math.max(1, Math.round(this.#cfg.poll_seconds));
  }

  /** From the node config, else the send's provider_refs (provider_context). */
  protected spec(ctx: ExecutionContext): WatchSpec<Omit<Watch, 'from_block'>> {
    const cfg = ctx.node_config;
    const p = ctx.provider_context;
    const bad = (detail: string) => ({ ok: false, code: 'CCIP_INVALID_CONFIG', detail }) as const;
    const id = cfg.message_id ?? p.message_id;
    if (typeof id !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(id)) return bad(`message_id ${JSON.stringify(id ?? null)} is not a bytes32 (config.message_id, or a preceding send)`);
    const seq = String(cfg.sequence_number ?? p.sequence_number ?? '');
    if (!/^[0-9]{1,20}$/.test(seq)) return bad('sequence_number is not a uint64 (config.sequence_number, or a preceding send)');
    const src = String(cfg.source_chain_selector ?? p.source_chain_selector ?? '');
    if (!/^[0-9]{1,20}$/.test(src)) return bad('source_chain_selector is not a uint64 (config, or a preceding send)');
    const chainId = Number(cfg.destination_chain_id ?? p.destination_chain_id);
    const entry = this.#cfg.chains.find((c) => c.chain_id === chainId);
    if (!entry || !this.#chains.get(chainId)) return { ok: false, code: 'CCIP_CHAIN_NOT_CONFIGURED', detail: `destination chain ${String(cfg.destination_chain_id ?? p.destination_chain_id ?? null)} has no ccip entry on a configured chain` };
    if (!entry.off_ramp) return { ok: false, code: 'CCIP_CHAIN_NOT_CONFIGURED', detail: `ccip.chains entry of chain ${chainId} names no off_ramp: its deliveries cannot be observed` };
    const recipient = cfg.recipient ?? p.recipient;
    if (typeof recipient !== 'string' || !isAddress(recipient, { strict: false })) return bad(`recipient ${JSON.stringify(recipient ?? null)} is not an address (config.recipient, or a preceding send)`);
    const amount = cfg.amount_base_units ?? p.amount_base_units;
    if (typeof amount !== 'string' || !/^[0-9]+$/.test(amount)) return bad(`amount_base_units ${JSON.stringify(amount ?? null)} is not a whole number (config, or a preceding send)`);
    const timeout = Number(cfg.delivery_timeout_seconds ?? this.#cfg.delivery_timeout_seconds);
    if (!Number.isFinite(timeout) || timeout <= 0) return bad('delivery_timeout_seconds must be a positive number');
    const num = (v: unknown) => (typeof v === 'number' && Number.isSafeInteger(v) ? v : null);
    return {
      ok: true,
      value: {
        message_id: id.toLowerCase() as Hex,
        sequence_number: seq,
        source_chain_selector: src,
        destination_chain_id: chainId,
        off_ramp: entry.off_ramp.toLowerCase() as Address,
        recipient: recipient.toLowerCase() as Address,
        amount_base_units: amount,
        source_chain_id: num(cfg.source_chain_id ?? p.source_chain_id),
        source_block_number: num(cfg.source_block_number ?? p.source_block_number),
        delivery_timeout_seconds: timeout,
      },
    };
  }
}
