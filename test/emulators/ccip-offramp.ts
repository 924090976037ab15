import { createWalletClient, decodeAbiParameters, http, parseAbi, type Address, type Hex, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { decodeExtraArgsV2, onRampAbi } from '../../src/executors/ccip/router.ts';

/**
 * An emulated CCIP execution (the commit and execution DONs in one) between the test contracts of
 * test/contracts/Ccip.sol: it watches each source OnRamp's CCIPMessageSent and, after `delayMs`,
 * calls `execute` on the OffRamp of the message's destination selector (which only this transmitter
 * may call, and which executes a (source, sequence number) once). The OffRamp releases or mints the
 * tokens to the receiver, calls the receiver when CCIP would, and records the execution state.
 * Tests can hold executions (`hold()`, then `release()`) or drop one message for good (`drop(id)`).
 * Messages with EVMExtraArgsV1 or no extraArgs get the 200k default gas limit, as the FeeQuoter's.
 */

const offRampWriteAbi = parseAbi([
  'struct RampMessageHeader { bytes32 messageId; uint64 sourceChainSelector; uint64 destChainSelector; uint64 sequenceNumber; uint64 nonce; }',
  'struct Any2EVMTokenTransfer { bytes sourcePoolAddress; address destTokenAddress; uint32 destGasAmount; bytes extraData; uint256 amount; }',
  'struct Any2EVMRampMessage { RampMessageHeader header; bytes sender; bytes data; address receiver; uint256 gasLimit; Any2EVMTokenTransfer[] tokenAmounts; }',
  'function execute(Any2EVMRampMessage message)',
]);

export interface CcipSentMessage {
  messageId: Hex;
  sourceChainSelector: bigint;
  destChainSelector: bigint;
  sequenceNumber: bigint;
  sender: Address;
  receiver: Address;
  amount: bigint;
  txHash: Hex;
}

export interface CcipSide {
  selector: bigint;
  chain: PublicClient;
  rpcUrl: string;
  onRamp: Address;
  offRamp: Address;
}

export interface CcipExecutor {
  /** Every message seen on a source, in order. */
  messages: CcipSentMessage[];
  /** Messages executed, in order, with the destination transaction. */
  executed: Array<{ messageId: Hex; txHash: Hex }>;
  hold(): void;
  release(): void;
  drop(messageId: Hex): void;
  stop(): Promise<void>;
}

export function startCcipOffRamp(opts: { sides: CcipSide[]; transmitterKey: Hex; delayMs?: number; pollMs?: number }): CcipExecutor {
  const account = privateKeyToAccount(opts.transmitterKey);
  const messages: CcipSentMessage[] = [];
  const executed: Array<{ messageId: Hex; txHash: Hex }> = [];
  const dropped = new Set<string>();
  const waiting: Array<{ args: unknown; msg: CcipSentMessage; due: number }> = [];
  const next = new Map<bigint, bigint>(opts.sides.map((s) => [s.selector, 0n]));
  let held = false;
  let stopped = false;
  let running: Promise<void> | null = null;

  const tick = () => {
    if (running || stopped) return;
    running = executeDue().finally(() => (running = null));
  };
  const executeDue = async () => {
    try {
      for (const side of opts.sides) {
        const head = await side.chain.getBlockNumber();
        const from = next.get(side.selector)!;
        if (head < from) continue;
        const logs = await side.chain.getContractEvents({ address: side.onRamp, abi: onRampAbi, eventName: 'CCIPMessageSent', fromBlock: from, toBlock: head, strict: true });
        next.set(side.selector, head + 1n);
        for (const log of logs) {
          const m = log.args.message;
          const [receiver] = decodeAbiParameters([{ type: 'address' }], m.receiver);
          const extra = decodeExtraArgsV2(m.extraArgs);
          const report = {
            header: m.header,
            sender: `0x${m.sender.slice(2).toLowerCase().padStart(64, '0')}` as Hex,
            data: m.data,
            receiver,
            gasLimit: extra ? extra.gasLimit : 200_000n,
            tokenAmounts: m.tokenAmounts.map((t) => ({
              sourcePoolAddress: `0x${t.sourcePoolAddress.slice(2).toLowerCase().padStart(64, '0')}` as Hex,
              destTokenAddress: decodeAbiParameters([{ type: 'address' }], t.destTokenAddress)[0],
              destGasAmount: 90_000,
              extraData: t.extraData,
              amount: t.amount,
            })),
          };
          const msg: CcipSentMessage = {
            messageId: m.header.messageId,
            sourceChainSelector: m.header.sourceChainSelector,
            destChainSelector: m.header.destChainSelector,
            sequenceNumber: m.header.sequenceNumber,
            sender: m.sender,
            receiver,
            amount: m.tokenAmounts[0]?.amount ?? 0n,
            txHash: log.transactionHash,
          };
          messages.push(msg);
          waiting.push({ args: report, msg, due: Date.now() + (opts.delayMs ?? 0) });
        }
      }
      if (held) return;
      const now = Date.now();
      for (const w of [...waiting]) {
        if (w.due > now) continue;
        waiting.splice(waiting.indexOf(w), 1);
        if (dropped.has(w.msg.messageId.toLowerCase())) continue;
        const dst = opts.sides.find((s) => s.selector === w.msg.destChainSelector);
        if (!dst) continue;
        const wallet = createWalletClient({ account, transport: http(dst.rpcUrl, { retryCount: 0 }) });
        let hash: Hex;
        try {
          hash = await wallet.writeContract({ address: dst.offRamp, abi: offRampWriteAbi, functionName: 'execute', args: [w.args as never], chain: null, gas: 2_000_000n });
        } catch (err) {
          // Not sent: tried again at the next tick (the OffRamp executes a message once anyway).
          waiting.unshift(w);
          throw err;
        }
        const receipt = await dst.chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
        if (receipt.status === 'success') executed.push({ messageId: w.msg.messageId, txHash: hash });
      }
    } catch {
      // A chain that did not answer this time: the next tick asks again.
    }
  };
  const timer = setInterval(tick, opts.pollMs ?? 100);

  return {
    messages,
    executed,
    hold: () => void (held = true),
    release: () => void (held = false),
    drop: (id) => void dropped.add(id.toLowerCase()),
    stop: async () => {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
