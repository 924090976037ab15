import { createWalletClient, decodeEventLog, http, parseAbi, type Address, type Hex, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

/**
 * An emulated LayerZero relayer (the verifiers and the executor in one) between the test endpoints
 * of test/contracts/Oft.sol: it watches each source endpoint's PacketSent, decodes the PacketV1
 * encoding and, after `delayMs`, calls lzReceive on the destination endpoint of the packet's dstEid
 * (which only this relayer may call, and only once per packet). The destination OFT then emits
 * OFTReceived with the packet's GUID. Tests can hold deliveries (`hold()`, then `release()`) or drop
 * one packet for good (`drop(guid)`).
 */

export const endpointEvents = parseAbi(['event PacketSent(bytes encodedPayload, bytes options, address sendLibrary)']);
const endpointAbi = parseAbi(['function lzReceive((uint32 srcEid, bytes32 sender, uint64 nonce) origin, address receiver, bytes32 guid, bytes message, bytes extraData) payable']);

export interface LzPacket {
  nonce: bigint;
  srcEid: number;
  sender: Hex;
  dstEid: number;
  receiver: Hex;
  guid: Hex;
  message: Hex;
  txHash: Hex;
}

export interface LzSide {
  eid: number;
  chain: PublicClient;
  rpcUrl: string;
  endpoint: Address;
}

export interface LzRelayer {
  /** Every packet seen on a source, in order. */
  packets: LzPacket[];
  /** GUIDs delivered, in order, with the destination transaction. */
  delivered: Array<{ guid: Hex; txHash: Hex }>;
  /** Stop delivering: packets seen from now wait until release(). */
  hold(): void;
  /** Deliver what waits and go on delivering. */
  release(): void;
  /** Never deliver this packet. */
  drop(guid: Hex): void;
  stop(): Promise<void>;
}

/** PacketV1: version(1) nonce(8) srcEid(4) sender(32) dstEid(4) receiver(32) guid(32) message. */
export function decodePacket(encoded: Hex, txHash: Hex): LzPacket | null {
  const b = encoded.slice(2);
  if (b.length < 113 * 2 || b.slice(0, 2) !== '01') return null;
  const at = (offset: number, size: number) => b.slice(offset * 2, (offset + size) * 2);
  return {
    nonce: BigInt(`0x${at(1, 8)}`),
    srcEid: Number.parseInt(at(9, 4), 16),
    sender: `0x${at(13, 32)}`,
    dstEid: Number.parseInt(at(45, 4), 16),
    receiver: `0x${at(49, 32)}`,
    guid: `0x${at(81, 32)}`,
    message: `0x${b.slice(113 * 2)}`,
    txHash,
  };
}

export function startLzRelayer(opts: { sides: LzSide[]; relayerKey: Hex; delayMs?: number; pollMs?: number }): LzRelayer {
  const account = privateKeyToAccount(opts.relayerKey);
  const packets: LzPacket[] = [];
  const delivered: Array<{ guid: Hex; txHash: Hex }> = [];
  const dropped = new Set<string>();
  const waiting: Array<{ packet: LzPacket; due: number }> = [];
  const next = new Map<number, bigint>(opts.sides.map((s) => [s.eid, 0n]));
  let held = false;
  let stopped = false;
  /** The tick in progress, if any: stop() waits for it rather than polling a flag. */
  let running: Promise<void> | null = null;

  const tick = () => {
    if (running || stopped) return;
    running = deliverDue().finally(() => (running = null));
  };
  const deliverDue = async () => {
    try {
      for (const side of opts.sides) {
        const head = await side.chain.getBlockNumber();
        const from = next.get(side.eid)!;
        if (head < from) continue;
        const logs = await side.chain.getLogs({ address: side.endpoint, event: endpointEvents[0], fromBlock: from, toBlock: head });
        next.set(side.eid, head + 1n);
        for (const log of logs) {
          const { args } = decodeEventLog({ abi: endpointEvents, data: log.data, topics: log.topics });
          const packet = decodePacket(args.encodedPayload, log.transactionHash!);
          if (!packet) continue;
          packets.push(packet);
          waiting.push({ packet, due: Date.now() + (opts.delayMs ?? 0) });
        }
      }
      if (held) return;
      const now = Date.now();
      for (const w of [...waiting]) {
        if (w.due > now) continue;
        waiting.splice(waiting.indexOf(w), 1);
        if (dropped.has(w.packet.guid.toLowerCase())) continue;
        const dst = opts.sides.find((s) => s.eid === w.packet.dstEid);
        if (!dst) continue;
        const wallet = createWalletClient({ account, transport: http(dst.rpcUrl, { retryCount: 0 }) });
        const p = w.packet;
        const receiver = `0x${p.receiver.slice(26)}` as Address;
        const hash = await wallet.writeContract({
          address: dst.endpoint,
          abi: endpointAbi,
          functionName: 'lzReceive',
          args: [{ srcEid: p.srcEid, sender: p.sender, nonce: p.nonce }, receiver, p.guid, p.message, '0x'],
          chain: null,
        });
        const receipt = await dst.chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
        if (receipt.status === 'success') delivered.push({ guid: p.guid, txHash: hash });
      }
    } catch {
      // A chain that did not answer this time: the next tick asks again.
    }
  };
  const timer = setInterval(tick, opts.pollMs ?? 100);

  return {
    packets,
    delivered,
    hold: () => void (held = true),
    release: () => void (held = false),
    drop: (guid) => void dropped.add(guid.toLowerCase()),
    stop: async () => {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
