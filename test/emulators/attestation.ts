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
import { listenOnLoopback } from '../helpers/net.ts';

/**
 * A loopback stand-in for Circle's attestation service (Iris v2), reading the source chains itself:
 * `GET /v2/messages/{sourceDomain}?transactionHash=0x…` looks the transaction's receipt up on the
 * domain's chain (viem), takes the MessageSent logs of the domain's MessageTransmitterV2 and answers
 * `{messages:[…]}` in log order. 404 until the transaction is mined; `pending_confirmations` (with
 * `attestation: "PENDING"`) until it has `confirmations` blocks; then `complete`, with the message
 * rewritten as Circle's attester does (a unique nonce, finalityThresholdExecuted, feeExecuted) and
 * signed over keccak256(message) by the attester key (r‖s‖v, v 27/28, low s).
 *
 * Scriptable: `signerKey` signs with another key (a wrong attester); `fault` answers a status
 * (5xx, or 429 with Retry-After) for the next `times` requests.
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
  port?: number;
}

export interface AttestationEmulator {
  url: string;
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
  const emu: AttestationEmulator = { url: '', requests: [], signerKey: null, confirmations: opts.confirmations ?? 1, fault: null, stop: async () => {} };
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
        if (confirmations < emu.confirmations) {
          return { message: raw, eventNonce: null, attestation: 'PENDING', status: 'pending_confirmations', cctpVersion: 2, delayReason: null };
        }
        // The attester's rewrite: a nonce unique per (domain, transaction, log), hard finality, no fee.
        const nonce = keccak256(encodeAbiParameters([{ type: 'uint32' }, { type: 'bytes32' }, { type: 'uint256' }], [source.domain, hash, BigInt(l.logIndex)]));
        let message = concatHex([sliceHex(raw, 0, 12), nonce, sliceHex(raw, 44, 144), numberToHex(2000, { size: 4 }), sliceHex(raw, 148)]);
        const decoded = decodeMessage(message);
        if (decoded?.burn) message = concatHex([sliceHex(message, 0, 148 + 164), numberToHex(0, { size: 32 }), sliceHex(message, 148 + 196)]);
        const signature = await sign({ hash: keccak256(message), privateKey: emu.signerKey ?? opts.attesterKey });
        return {
          message,
          eventNonce: nonce,
          attestation: serializeSignature(signature),
          status: 'complete',
          cctpVersion: 2,
          delayReason: null,
          decodedMessage: decoded ? { sourceDomain: String(decoded.sourceDomain), destinationDomain: String(decoded.destinationDomain), nonce } : null,
        };
      }),
    );
    return { status: 200, body: { messages } };
  }

  ({ url: emu.url, stop: emu.stop } = await listenOnLoopback(server, opts.port));
  return emu;
}
