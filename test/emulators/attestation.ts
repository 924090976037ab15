import { createServer, type Server } from 'node:http';
import {
  concatHex,
  encodeAbiParameters,
  keccak256,
  numberToHex,
  parseEventLogs,
  serializeSignature,
  sliceHex,
  type Address,
  type Hex,
  type PublicClient,
} from 'viem';
import { sign } from 'viem/accounts';
import { decodeMessage, messageTransmitterAbi } from '../../src/executors/cctp/message.ts';
import { feeOfMilliBps, milliBps } from '../../src/executors/cctp/fees.ts';
import { listenOnLoopback } from '../helpers/net.ts';

/**
 * A loopback stand-in for Circle's attestation service (Iris v2), reading the source chains itself:
 * `GET /v2/messages/{sourceDomain}?transactionHash=0x…` looks the transaction's receipt up on the
 * domain's chain (viem), takes the MessageSent logs of the domain's MessageTransmitterV2 and answers
 * `{messages:[…]}` in log order. 404 until the transaction is mined; `pending_confirmations` (with
 * `attestation: "PENDING"`) until it has enough blocks; then `complete`, with the message
 * rewritten as Circle's attester does (a unique nonce, finalityThresholdExecuted, feeExecuted) and
 * signed over keccak256(message) by the attester key (r‖s‖v, v 27/28, low s).
 *
 * Fees as Circle's v2 API states them: `GET /v2/burn/USDC/fees/{source}/{destination}` answers
 * `fees` (`[{finalityThreshold, minimumFee}]`, minimumFee in bps). A burn asking for finality at or
 * below 1000 whose maxFee covers the fast fee (ceil(amount * bps / 1e4)) is a fast transfer:
 * attested after `fastConfirmations` blocks at finalityThresholdExecuted 1000, feeExecuted the fast
 * fee. Any other burn is standard: attested after `confirmations` at 2000 with the standard fee
 * (0 by default), never above its maxFee. The answer's `decodedMessage.decodedMessageBody` carries
 * maxFee and feeExecuted, as Iris's does.
 *
 * Scriptable: `signerKey` signs with another key (a wrong attester); `fault` answers a status
 * (5xx, or 429 with Retry-After) for the next `times` requests; `fees` is the quote served and applied;
 * `feeExecutedOverride` and `maxFeeOverride` attest a fee or a cap of their own (a rogue attester).
 */

export interface AttestationSource {
  domain: number;
  chain: PublicClient;
  transmitter: Address;
}

export interface AttestationEmulatorOptions {
  sources: AttestationSource[];
  attesterKey: Hex;
  /** Blocks, the burn's own included, before a message is attested (default 1). */
  confirmations?: number;
  /** Blocks before a fast transfer is attested (default 1). */
  fastConfirmations?: number;
  /** The fee quote served and charged (default `[{1000, 1}, {2000, 0}]`, as Circle's example). */
  fees?: FeeQuote[];
  port?: number;
}

/** One entry of Circle's fee quote: minimumFee in bps (may be fractional, e.g. 1.3). */
export interface FeeQuote {
  finalityThreshold: number;
  minimumFee: number;
}

export interface AttestationEmulator {
  url: string;
  /** The fee quote served by /v2/burn/USDC/fees and applied to the burns attested (for every route). */
  fees: FeeQuote[];
  /** A rogue attester: writes this feeExecuted into every burn message, whatever its maxFee (null: the quote's). */
  feeExecutedOverride: bigint | null;
  /** A rogue attester: writes this maxFee into every burn message (null: the burn's own). */
  maxFeeOverride: bigint | null;
  fastConfirmations: number;
  /** Requests served, by path and query. */
  requests: string[];
  /** Signs with this key instead of the attester's (null: the attester). */
  signerKey: Hex | null;
  confirmations: number;
  /** The next `times` requests answer `status` (with Retry-After when given). */
  fault: { status: number; retryAfter?: number; times: number } | null;
  stop(): Promise<void>;
}

export async function startAttestationEmulator(opts: AttestationEmulatorOptions): Promise<AttestationEmulator> {
  const emu: AttestationEmulator = {
    url: '',
    requests: [],
    signerKey: null,
    confirmations: opts.confirmations ?? 1,
    fastConfirmations: opts.fastConfirmations ?? 1,
    fees: opts.fees ?? [
      { finalityThreshold: 1000, minimumFee: 1 },
      { finalityThreshold: 2000, minimumFee: 0 },
    ],
    feeExecutedOverride: null,
    maxFeeOverride: null,
    fault: null,
    stop: async () => {},
  };
  const server: Server = createServer((req, res) => {
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    };
    emu.requests.push(req.url ?? '');
    if (emu.fault && emu.fault.times > 0) {
      emu.fault.times--;
      const f = emu.fault;
      return send(f.status, { error: 'scripted fault' }, f.retryAfter !== undefined ? { 'retry-after': String(f.retryAfter) } : {});
    }
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const fee = /^\/v2\/burn\/USDC\/fees\/([0-9]+)\/([0-9]+)$/.exec(url.pathname);
    if (req.method === 'GET' && fee) {
      const known = (d: string) => opts.sources.some((s) => s.domain === Number(d));
      if (!known(fee[1]!) || !known(fee[2]!) || fee[1] === fee[2]) return send(400, { error: `unsupported route ${fee[1]} -> ${fee[2]}` });
      return send(200, emu.fees);
    }
    const m = /^\/v2\/messages\/([0-9]+)$/.exec(url.pathname);
    if (req.method !== 'GET' || !m) return send(404, { error: 'Not found' });
    const source = opts.sources.find((s) => s.domain === Number(m[1]));
    const hash = url.searchParams.get('transactionHash');
    if (!source) return send(400, { error: `unsupported domain ${m[1]}` });
    if (!hash || !/^0x[0-9a-fA-F]{64}$/.test(hash)) return send(400, { error: 'transactionHash is required' });
    answer(source, hash as Hex).then(
      (r) => send(r.status, r.body),
      (err: Error) => send(500, { error: err.message }),
    );
  });

  async function answer(source: AttestationSource, hash: Hex): Promise<{ status: number; body: unknown }> {
    let receipt;
    try {
      receipt = await source.chain.getTransactionReceipt({ hash });
    } catch {
      return { status: 404, body: { error: 'Message not found' } };
    }
    const head = await source.chain.getBlockNumber();
    const confirmations = Number(head - receipt.blockNumber + 1n);
    const logs = parseEventLogs({ abi: messageTransmitterAbi, eventName: 'MessageSent', logs: receipt.logs, strict: true }).filter(
      (l) => l.address.toLowerCase() === source.transmitter.toLowerCase(),
    );
    const messages = await Promise.all(
      logs.map(async (l) => {
        const raw = l.args.message;
        const level = levelOf(decodeMessage(raw));
        if (confirmations < (level.finality === 1000 ? emu.fastConfirmations : emu.confirmations)) {
          return { message: raw, eventNonce: null, attestation: 'PENDING', status: 'pending_confirmations', cctpVersion: 2, delayReason: null };
        }
        // The attester's rewrite: a nonce unique per (domain, transaction, log), the finality it attests at, the fee it charges.
        const nonce = keccak256(encodeAbiParameters([{ type: 'uint32' }, { type: 'bytes32' }, { type: 'uint256' }], [source.domain, hash, BigInt(l.logIndex)]));
        let message = concatHex([sliceHex(raw, 0, 12), nonce, sliceHex(raw, 44, 144), numberToHex(level.finality, { size: 4 }), sliceHex(raw, 148)]);
        const decoded = decodeMessage(message);
        if (decoded?.burn) message = concatHex([sliceHex(message, 0, 148 + 164), numberToHex(level.fee, { size: 32 }), sliceHex(message, 148 + 196)]);
        if (decoded?.burn && emu.maxFeeOverride !== null) message = concatHex([sliceHex(message, 0, 148 + 132), numberToHex(emu.maxFeeOverride, { size: 32 }), sliceHex(message, 148 + 164)]);
        const signature = await sign({ hash: keccak256(message), privateKey: emu.signerKey ?? opts.attesterKey });
        const b = decoded?.burn;
        return {
          message,
          eventNonce: nonce,
          attestation: serializeSignature(signature),
          status: 'complete',
          cctpVersion: 2,
          delayReason: null,
          decodedMessage: decoded
            ? {
                sourceDomain: String(decoded.sourceDomain),
                destinationDomain: String(decoded.destinationDomain),
                nonce,
                minFinalityThreshold: String(decoded.minFinalityThreshold),
                finalityThresholdExecuted: String(level.finality),
                decodedMessageBody: b
                  ? { burnToken: b.burnToken, mintRecipient: b.mintRecipient, amount: b.amount.toString(), messageSender: b.messageSender, maxFee: b.maxFee.toString(), feeExecuted: level.fee.toString(), expirationBlock: b.expirationBlock.toString() }
                  : null,
              }
            : null,
        };
      }),
    );
    return { status: 200, body: { messages } };
  }

  /** Fast (1000) when the burn asks for it and its maxFee covers the fast fee; else standard (2000). */
  function levelOf(m: ReturnType<typeof decodeMessage>): { finality: number; fee: bigint } {
    const quote = (finality: number) => {
      const e = emu.fees.find((f) => f.finalityThreshold === finality);
      const milli = e ? milliBps(e.minimumFee.toFixed(3)) : null;
      return milli ?? 0n;
    };
    if (!m?.burn) return { finality: 2000, fee: 0n };
    if (emu.feeExecutedOverride !== null) return { finality: m.minFinalityThreshold <= 1000 ? 1000 : 2000, fee: emu.feeExecutedOverride };
    const fast = feeOfMilliBps(m.burn.amount, quote(1000));
    if (m.minFinalityThreshold <= 1000 && m.burn.maxFee >= fast) return { finality: 1000, fee: fast };
    const standard = feeOfMilliBps(m.burn.amount, quote(2000));
    return { finality: 2000, fee: standard < m.burn.maxFee ? standard : m.burn.maxFee };
  }

  ({ url: emu.url, stop: emu.stop } = await listenOnLoopback(server, opts.port));
  return emu;
}
