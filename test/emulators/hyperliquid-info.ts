import { createServer, type IncomingMessage, type Server } from 'node:http';
import { erc20Abi, type Address, type PublicClient } from 'viem';
import { listenOnLoopback } from '../helpers/net.ts';

/**
 * A loopback stand-in for Hyperliquid's info API (`POST /info`), crediting deposits by watching the
 * chain itself as Hyperliquid's validators watch Arbitrum: every USDC `Transfer` to the bridge
 * address (Bridge2 runs no code for a deposit: it is a plain transfer) is credited to the SENDING
 * address's `withdrawable`, after `creditDelayMs`, only when it is at least 5 USDC; a smaller one is
 * never credited (it is lost, as on Hyperliquid), and is recorded in `lost`.
 *
 * `{"type":"clearinghouseState","user":"0x…"}` answers with the real field names, amounts as
 * decimal strings (`marginSummary`, `crossMarginSummary`, `crossMaintenanceMarginUsed`,
 * `withdrawable`, `assetPositions`, `time` in ms). A body that is not JSON, an unknown `type` or a
 * `user` that is not an address is refused with a 4xx carrying `{code, msg, data}`, as the real API does.
 */

export interface HyperliquidInfoOptions {
  chain: PublicClient;
  token: Address;
  bridge: Address;
  /** Token decimals (USDC: 6). */
  decimals?: number;
  /** Time between a deposit's block being seen and its credit (default 300 ms). */
  creditDelayMs?: number;
  /** How often the chain is read for new Transfer logs (default 100 ms). */
  pollMs?: number;
}

export interface HyperliquidInfoEmulator {
  url: string;
  /** Credited deposits, in order. */
  credits: Array<{ user: Address; amount: bigint; txHash: string }>;
  /** Deposits under the minimum: seen, never credited. */
  lost: Array<{ user: Address; amount: bigint; txHash: string }>;
  /** clearinghouseState requests answered. */
  requests: number;
  /** Sets an account's withdrawable (base units), e.g. funds it held before the test. */
  setWithdrawable(user: Address, baseUnits: bigint): void;
  withdrawable(user: Address): bigint;
  stop(): Promise<void>;
}

const MIN_DEPOSIT_USDC = 5n;
const USER = /^0x[0-9a-fA-F]{40}$/;

export async function startHyperliquidInfo(opts: HyperliquidInfoOptions): Promise<HyperliquidInfoEmulator> {
  const decimals = opts.decimals ?? 6;
  const minimum = MIN_DEPOSIT_USDC * 10n ** BigInt(decimals);
  const balances = new Map<string, bigint>();
  const seen = new Set<string>();
  const timers = new Set<NodeJS.Timeout>();
  let next = 0n;
  let stopped = false;

  const emu: HyperliquidInfoEmulator = {
    url: '',
    credits: [],
    lost: [],
    requests: 0,
    setWithdrawable: (user, v) => void balances.set(user.toLowerCase(), v),
    withdrawable: (user) => balances.get(user.toLowerCase()) ?? 0n,
    stop: async () => {},
  };

  const scan = async () => {
    const head = await opts.chain.getBlockNumber();
    if (head < next) return;
    const logs = await opts.chain.getContractEvents({ address: opts.token, abi: erc20Abi, eventName: 'Transfer', args: { to: opts.bridge }, fromBlock: next, toBlock: head, strict: true });
    next = head + 1n;
    for (const l of logs) {
      const id = `${l.transactionHash}:${l.logIndex}`;
      if (seen.has(id)) continue;
      seen.add(id);
      const deposit = { user: l.args.from.toLowerCase() as Address, amount: l.args.value, txHash: l.transactionHash };
      if (deposit.amount < minimum) {
        emu.lost.push(deposit);
        continue;
      }
      const timer = setTimeout(() => {
        timers.delete(timer);
        balances.set(deposit.user, emu.withdrawable(deposit.user) + deposit.amount);
        emu.credits.push(deposit);
      }, opts.creditDelayMs ?? 300);
      timers.add(timer);
    }
  };
  let poller: NodeJS.Timeout;
  const loop = () => {
    if (stopped) return;
    scan()
      .catch(() => {})
      .finally(() => {
        if (!stopped) poller = setTimeout(loop, opts.pollMs ?? 100);
      });
  };
  loop();

  const usd = (v: bigint) => {
    const digits = v.toString().padStart(decimals + 1, '0');
    const fraction = digits.slice(digits.length - decimals).replace(/0+$/, '');
    return `${digits.slice(0, digits.length - decimals)}.${fraction || '0'}`;
  };
  const refuse = (res: import('node:http').ServerResponse, status: number, msg: string) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ code: status, msg, data: null }));
  };

  const server: Server = createServer(async (req, res) => {
    if (req.method !== 'POST' || (req.url ?? '').split('?')[0] !== '/info') return refuse(res, req.method !== 'POST' ? 405 : 404, 'POST /info only');
    let body: unknown;
    try {
      body = JSON.parse(await read(req));
    } catch {
      return refuse(res, 400, 'the body is not JSON');
    }
    const b = body as Record<string, unknown> | null;
    if (b === null || typeof b !== 'object' || Array.isArray(b)) return refuse(res, 422, 'Failed to deserialize the JSON body into the target type');
    if (b.type !== 'clearinghouseState') return refuse(res, 422, `Failed to deserialize the JSON body into the target type: unknown variant ${JSON.stringify(b.type ?? null)}`);
    if (typeof b.user !== 'string' || !USER.test(b.user)) return refuse(res, 422, 'Failed to deserialize the JSON body into the target type: user');
    if (b.dex !== undefined && b.dex !== '') return refuse(res, 422, 'unknown dex');
    emu.requests++;
    const value = usd(emu.withdrawable(b.user as Address));
    const summary = { accountValue: value, totalNtlPos: '0.0', totalRawUsd: value, totalMarginUsed: '0.0' };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ marginSummary: summary, crossMarginSummary: summary, crossMaintenanceMarginUsed: '0.0', withdrawable: value, assetPositions: [], time: Date.now() }));
  });
  const listening = await listenOnLoopback(server);
  emu.url = `${listening.url}/info`;
  emu.stop = async () => {
    stopped = true;
    clearTimeout(poller);
    for (const t of timers) clearTimeout(t);
    await listening.stop();
  };
  return emu;
}

function read(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let s = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (s += c));
    req.on('end', () => resolve(s));
    req.on('error', reject);
  });
}
