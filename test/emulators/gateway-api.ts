import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import { createWalletClient, encodeAbiParameters, http, keccak256, parseEventLogs, recoverTypedDataAddress, type Address, type Hex, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import {
  addressOfWord,
  BURN_INTENT_FIELDS,
  encodeAttestation,
  encodeBurnIntent,
  GATEWAY_DOMAIN,
  gatewayWalletAbi,
  parseBurnIntentMessage,
  TRANSFER_SPEC_FIELDS,
  transferSpecHash,
  word,
  type BurnIntent,
} from '../../src/executors/gateway/codec.ts';
import { listenOnLoopback } from '../helpers/net.ts';

/**
 * A loopback stand-in for Circle Gateway's API (`/v1/info`, `/v1/balances`, `/v1/estimate`,
 * `/v1/transfer`), as strict as the real one where its behaviour is documented
 * (docs/gateway-lane.md, "Facts"): a burn intent is attested only when its EIP-712 signature
 * recovers the spec's sourceSigner, which must be the depositor (delegates are not emulated); the
 * source wallet and destination minter are the published contracts of their domains; the
 * depositor's available balance in the GatewayWallet (read on the chain: a plain ERC-20 transfer
 * to the wallet credits nothing) covers value plus fee; maxFee covers the published fee (a base
 * fee per source domain plus 0.5 bps of the value); maxBlockHeight has not passed on the source
 * chain; and the transfer spec hash was never attested before. Then it burns on the source chain
 * (gatewayBurn, signed by its burn signer) and answers the attestation, signed by its attestation
 * signer, that the destination's GatewayMinter accepts.
 *
 * Refusals are `{success: false, message}` with a 4xx, as the quickstart reads them. One behaviour
 * is this emulator's assumption, not a documented one: the very same signed burn intent posted
 * again (the same spec, maxFee, maxBlockHeight and signature) is answered with the transfer it
 * already made, and burns nothing more; another intent over an attested spec hash is refused.
 */

export interface GatewayDomainSide {
  domain: number;
  chain: PublicClient;
  rpcUrl: string;
  wallet: Address;
  minter: Address;
  token: Address;
  /** The base fee of a burn on this domain, in token base units (Circle publishes it per chain). */
  baseFee: bigint;
}

export interface GatewayApiOptions {
  sides: GatewayDomainSide[];
  burnSignerKey: Hex;
  attestationSignerKey: Hex;
  /** Blocks of the destination chain an attestation stays valid (default 1000). */
  attestationBlocks?: bigint;
}

export interface GatewayTransfer {
  transferId: string;
  specHash: Hex;
  burnTxHash: Hex;
  intent: BurnIntent;
  signature: Hex;
  fee: bigint;
}

export interface GatewayApiEmulator {
  url: string;
  transfers: GatewayTransfer[];
  /** Every refusal, in order: the message answered. */
  refusals: string[];
  /** `POST /v1/transfer` calls answered or held. */
  transferCalls: number;
  /** `POST /v1/balances` calls, refused ones included. */
  balanceCalls: number;
  /** Answers of /v1/transfer are held after the burn (the transfer is made, the answer never leaves) until release(). */
  holdAnswers(): Promise<void>;
  release(): void;
  stop(): Promise<void>;
}

/** Gateway's transfer fee on cross-chain transfers: 0.5 bps of the value, rounded up. */
export function gatewayTransferFee(value: bigint): bigint {
  return (value * 5n + 99_999n) / 100_000n;
}

class Refused extends Error {
  constructor(
    message: string,
    readonly status = 400,
  ) {
    super(message);
  }
}

async function body(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new Refused('the request body is not JSON');
  }
}

export async function startGatewayApi(opts: GatewayApiOptions): Promise<GatewayApiEmulator> {
  const burnSigner = privateKeyToAccount(opts.burnSignerKey);
  const attester = privateKeyToAccount(opts.attestationSignerKey);
  const byDomain = new Map(opts.sides.map((s) => [s.domain, s]));
  const attested = new Map<Hex, { answer: Record<string, unknown>; key: string }>();
  let hold: { promise: Promise<void>; release: () => void; reached: () => void; reachedPromise: Promise<void> } | null = null;

  const emu: GatewayApiEmulator = {
    url: '',
    transfers: [],
    refusals: [],
    transferCalls: 0,
    balanceCalls: 0,
    holdAnswers: () => {
      let release!: () => void;
      let reached!: () => void;
      const promise = new Promise<void>((r) => (release = r));
      const reachedPromise = new Promise<void>((r) => (reached = r));
      hold = { promise, release, reached, reachedPromise };
      return reachedPromise;
    },
    release: () => {
      const h = hold;
      hold = null;
      h?.release();
    },
    stop: async () => {},
  };

  const feeOf = (side: GatewayDomainSide, value: bigint) => side.baseFee + gatewayTransferFee(value);

  /** One burn intent checked as the API checks it; the source and destination sides. */
  async function check(item: unknown): Promise<{ intent: BurnIntent; signature: Hex; source: GatewayDomainSide; destination: GatewayDomainSide; fee: bigint }> {
    if (typeof item !== 'object' || item === null) throw new Refused('each entry is {burnIntent, signature}');
    const { burnIntent, signature } = item as { burnIntent?: unknown; signature?: unknown };
    if (burnIntent === undefined) throw new Refused('burnIntent is required (burn intent sets are not supported here)');
    if (typeof signature !== 'string' || !/^0x[0-9a-fA-F]{130}$/.test(signature)) throw new Refused('signature must be a 65-byte hex string');
    const parsed = parseBurnIntentMessage(burnIntent);
    if (!parsed.ok) throw new Refused(`invalid burn intent: ${parsed.detail}`);
    const intent = parsed.value;
    const s = intent.spec;
    if (s.version !== 1) throw new Refused(`unsupported transfer spec version ${s.version}`);
    const source = byDomain.get(s.sourceDomain);
    if (!source) throw new Refused(`unsupported source domain ${s.sourceDomain}`);
    const destination = byDomain.get(s.destinationDomain);
    if (!destination) throw new Refused(`unsupported destination domain ${s.destinationDomain}`);
    if (s.sourceContract !== word(source.wallet)) throw new Refused(`sourceContract is not the GatewayWallet of domain ${s.sourceDomain}`);
    if (s.destinationContract !== word(destination.minter)) throw new Refused(`destinationContract is not the GatewayMinter of domain ${s.destinationDomain}`);
    if (s.sourceToken !== word(source.token)) throw new Refused(`sourceToken is not USDC on domain ${s.sourceDomain}`);
    if (s.destinationToken !== word(destination.token)) throw new Refused(`destinationToken is not USDC on domain ${s.destinationDomain}`);
    const depositor = addressOfWord(s.sourceDepositor);
    const signerOfSpec = addressOfWord(s.sourceSigner);
    if (!depositor || !signerOfSpec || !addressOfWord(s.destinationRecipient) || !addressOfWord(s.destinationCaller)) throw new Refused('an address field is not a left-padded address');
    if (s.value === 0n) throw new Refused('value must be more than zero');
    let recovered: Address;
    try {
      recovered = await recoverTypedDataAddress({
        domain: { ...GATEWAY_DOMAIN },
        types: { BurnIntent: [...BURN_INTENT_FIELDS], TransferSpec: [...TRANSFER_SPEC_FIELDS] },
        primaryType: 'BurnIntent',
        message: intent as never,
        signature: signature as Hex,
      });
    } catch {
      throw new Refused('invalid signature: it recovers no address');
    }
    if (recovered.toLowerCase() !== signerOfSpec) throw new Refused(`invalid signature: the burn intent is signed by ${recovered.toLowerCase()}, not its sourceSigner ${signerOfSpec}`);
    if (signerOfSpec !== depositor) throw new Refused(`sourceSigner ${signerOfSpec} is not the depositor ${depositor} nor a delegate of it`);
    const head = await source.chain.getBlockNumber();
    if (intent.maxBlockHeight < head) throw new Refused(`burn intent expired: maxBlockHeight ${intent.maxBlockHeight} is below the current block ${head} of domain ${s.sourceDomain}`);
    const fee = feeOf(source, s.value);
    if (intent.maxFee < fee) throw new Refused(`maxFee ${intent.maxFee} is too low: the fee of this transfer is ${fee} (base ${source.baseFee}, transfer ${gatewayTransferFee(s.value)})`);
    const available = await source.chain.readContract({ address: source.wallet, abi: gatewayWalletAbi, functionName: 'availableBalance', args: [source.token, depositor] });
    if (available < s.value + fee) throw new Refused(`insufficient balance: depositor ${depositor} has ${available} available on domain ${s.sourceDomain}, the transfer needs ${s.value + fee} (value plus fee)`);
    return { intent, signature: signature.toLowerCase() as Hex, source, destination, fee };
  }

  async function transfer(entries: unknown): Promise<Record<string, unknown>> {
    if (!Array.isArray(entries) || entries.length !== 1) throw new Refused('the body is a JSON array of one {burnIntent, signature} (several are not supported here)');
    const entry = entries[0] as { burnIntent?: unknown; signature?: unknown };
    const pre = parseBurnIntentMessage(entry?.burnIntent);
    if (pre.ok) {
      const known = attested.get(transferSpecHash(pre.value.spec));
      if (known) {
        if (known.key === JSON.stringify([entry.burnIntent, String(entry.signature).toLowerCase()])) return known.answer;
        throw new Refused(`duplicate transfer spec hash ${transferSpecHash(pre.value.spec)}: a transfer was already attested for it (use a new salt)`, 409);
      }
    }
    const c = await check(entry);
    const specHash = transferSpecHash(c.intent.spec);
    const calldataBytes = encodeAbiParameters([{ type: 'bytes[]' }, { type: 'bytes[]' }, { type: 'uint256[][]' }], [[encodeBurnIntent(c.intent)], [c.signature], [[c.fee]]]);
    const burnSignature = await burnSigner.signMessage({ message: { raw: keccak256(calldataBytes) } });
    const wallet = createWalletClient({ account: burnSigner, transport: http(c.source.rpcUrl, { retryCount: 0 }) });
    const hash = await wallet.writeContract({ address: c.source.wallet, abi: gatewayWalletAbi, functionName: 'gatewayBurn', args: [calldataBytes, burnSignature], chain: null });
    const receipt = await c.source.chain.waitForTransactionReceipt({ hash, pollingInterval: 50, timeout: 30_000 });
    const burned = parseEventLogs({ abi: gatewayWalletAbi, eventName: 'GatewayBurned', logs: receipt.logs, strict: true }).filter((l) => l.args.transferSpecHash.toLowerCase() === specHash);
    if (receipt.status !== 'success' || burned.length !== 1) throw new Refused(`the burn of ${specHash} did not go through on domain ${c.source.domain}`, 500);
    const expirationBlock = (await c.destination.chain.getBlockNumber()) + (opts.attestationBlocks ?? 1000n);
    const attestation = encodeAttestation(expirationBlock, c.intent.spec);
    const signature = await attester.signMessage({ message: { raw: keccak256(attestation) } });
    const transferId = randomUUID();
    const answer = {
      transferId,
      attestation,
      signature,
      fees: {
        total: c.fee.toString(),
        token: 'USDC',
        perIntent: [{ transferSpecHash: specHash, domain: c.source.domain, baseFee: c.source.baseFee.toString(), transferFee: gatewayTransferFee(c.intent.spec.value).toString() }],
      },
      expirationBlock: expirationBlock.toString(),
    };
    attested.set(specHash, { answer, key: JSON.stringify([entry.burnIntent, c.signature]) });
    emu.transfers.push({ transferId, specHash, burnTxHash: hash, intent: c.intent, signature: c.signature, fee: c.fee });
    return answer;
  }

  const decimalOf = (v: bigint) => {
    const whole = v / 1_000_000n;
    const frac = (v % 1_000_000n).toString().padStart(6, '0').replace(/0+$/, '');
    return frac ? `${whole}.${frac}` : whole.toString();
  };

  /**
   * `POST /v1/balances` as Circle's API reference has it (Gateway, "Get token balances for specified
   * addresses", openapi/gateway.yaml): `{token, sources: [{depositor, domain?}]}`, token required and
   * one of `USDC`, sources required, each with a depositor and an optional integer domain (omitted:
   * every domain); answered `{token, balances: [{domain, depositor, balance}]}`, the available balance
   * as a decimal string in USDC. A domain this API does not serve is refused, not answered empty.
   */
  async function balances(b: unknown): Promise<Record<string, unknown>> {
    if (typeof b !== 'object' || b === null || Array.isArray(b)) throw new Refused('the body is an object {token, sources}');
    const { token, sources } = b as { token?: unknown; sources?: unknown };
    if (token === undefined) throw new Refused('token is required');
    if (token !== 'USDC') throw new Refused(`unsupported token ${JSON.stringify(token)}: token is one of USDC`);
    if (!Array.isArray(sources)) throw new Refused('sources is required: an array of {depositor, domain}');
    const answered = [];
    for (const src of sources as unknown[]) {
      if (typeof src !== 'object' || src === null || Array.isArray(src)) throw new Refused('each source is an object {depositor, domain}');
      const { depositor, domain } = src as { depositor?: unknown; domain?: unknown };
      if (typeof depositor !== 'string') throw new Refused('sources[].depositor is required');
      if (domain !== undefined && (typeof domain !== 'number' || !Number.isInteger(domain))) throw new Refused(`sources[].domain must be an integer, not ${JSON.stringify(domain)}`);
      if (domain !== undefined && !byDomain.has(domain)) throw new Refused(`unsupported domain ${domain}`);
      // Every domain here is an EVM chain: the depositor must be an address there.
      if (!/^0x[0-9a-fA-F]{40}$/.test(depositor)) throw new Refused(`depositor ${JSON.stringify(depositor)} is not a valid address on domain ${domain ?? 'any'}`);
      for (const s of domain === undefined ? opts.sides : [byDomain.get(domain)!]) {
        const v = await s.chain.readContract({ address: s.wallet, abi: gatewayWalletAbi, functionName: 'availableBalance', args: [s.token, depositor as Address] });
        answered.push({ domain: s.domain, depositor, balance: decimalOf(v) });
      }
    }
    return { token: 'USDC', balances: answered };
  }

  const server = createServer((req, res) => {
    const send = (status: number, value: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'GET' && url.pathname === '/v1/info') {
        return send(200, {
          version: 1,
          domains: opts.sides.map((s) => ({ chain: `anvil-${s.domain}`, network: 'local', domain: s.domain, walletContract: { address: s.wallet }, minterContract: { address: s.minter } })),
        });
      }
      if (req.method === 'POST' && url.pathname === '/v1/balances') {
        emu.balanceCalls++;
        return send(200, await balances(await body(req)));
      }
      if (req.method === 'POST' && url.pathname === '/v1/estimate') {
        const b = await body(req);
        if (!Array.isArray(b)) throw new Refused('the body is a JSON array of {spec}');
        const perIntent = [];
        let total = 0n;
        for (const e of b as Array<{ spec?: { sourceDomain?: unknown; value?: unknown } }>) {
          const side = byDomain.get(Number(e?.spec?.sourceDomain));
          if (!side || typeof e.spec?.value !== 'string' || !/^[0-9]+$/.test(e.spec.value)) throw new Refused('each entry is {spec} with a known sourceDomain and a value');
          const fee = feeOf(side, BigInt(e.spec.value));
          total += fee;
          perIntent.push({ domain: side.domain, baseFee: side.baseFee.toString(), transferFee: gatewayTransferFee(BigInt(e.spec.value)).toString() });
        }
        return send(200, { fees: { total: total.toString(), token: 'USDC', perIntent } });
      }
      if (req.method === 'POST' && url.pathname === '/v1/transfer') {
        emu.transferCalls++;
        const answer = await transfer(await body(req));
        const h = hold;
        if (h) {
          h.reached();
          await h.promise;
          res.destroy();
          return;
        }
        return send(201, answer);
      }
      throw new Refused(`no route ${req.method} ${url.pathname}`, 404);
    })().catch((err: unknown) => {
      const message = err instanceof Refused ? err.message : `internal error: ${(err as Error).message.split('\n')[0]}`;
      emu.refusals.push(message);
      if (!res.headersSent) send(err instanceof Refused ? err.status : 500, { success: false, message });
    });
  });
  const listening = await listenOnLoopback(server);
  emu.url = listening.url;
  emu.stop = async () => {
    emu.release();
    await listening.stop();
  };
  return emu;
}
