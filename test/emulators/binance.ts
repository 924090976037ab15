import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { listenOnLoopback, type Listening } from '../helpers/net.ts';
import { setTimeout as sleep } from 'node:timers/promises';
import { createPublicClient, createWalletClient, erc20Abi, formatUnits, http, parseUnits, type Hex, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';

/**
 * A Binance spot/SAPI emulator on 127.0.0.1, speaking the subset ccxt's binance client uses for
 * withdrawals, deposits and balances (facts: ccxt 4.5.84 `js/src/binance.js`, Binance's wallet
 * and spot REST docs):
 *
 * - signed endpoints check `X-MBX-APIKEY`, the HMAC-SHA256 `signature` over query string plus body
 *   (-1022 when wrong), and `timestamp` against `recvWindow` (-1021 when stale);
 * - `GET /api/v3/time`, `/api/v3/exchangeInfo`, `/api/v3/account`, `/sapi/v1/capital/config/getall`,
 *   `/sapi/v1/capital/deposit/address`, `/sapi/v1/capital/deposit/hisrec`,
 *   `/sapi/v1/capital/withdraw/history`, `POST /sapi/v1/capital/withdraw/apply`;
 * - a coin has one or more networks (`networkList` of capital/config/getall in Binance's shape, each
 *   with its own withdrawIntegerMultiple, withdrawMin/Max, withdrawFee and withdrawEnable); a
 *   withdraw/apply names one (`network`, else the coin's default) and is refused like Binance
 *   refuses it: an unknown or suspended network -4019, an amount that is not a multiple of the
 *   network's withdrawIntegerMultiple -4021 (checked on the decimal text, never rounded), below its
 *   withdrawMin -4022;
 * - an accepted withdrawal is paid on the local chain by a pluggable payout function (default: a
 *   native-coin transfer from the hot wallet); its hash appears as `txId` once sent, and its status
 *   goes 4 (processing) -> 6 (completed) once mined, 5 (failure) when the payout fails or reverts;
 * - transfers to the deposit address are seen by scanning the chain when a request asks, and
 *   credited (status 1) after `depositConfirmations` blocks.
 *
 * A repeated `withdrawOrderId` is refused (HTTP 400, code -4000): Binance's own behaviour is not
 * documented, and refusing is the stricter choice, so a client that ever sent a second apply for
 * the same id would see it fail instead of silently succeeding.
 *
 * Faults are scripted per path (or for every path) with fault(): accept-then-drop (the withdrawal
 * is recorded, the socket destroyed before an answer), accept-then-hold (recorded, never answered),
 * an HTTP status with Retry-After, a server error, a slow answer.
 */

/** One network of a coin, as Binance lists it in capital/config/getall's `networkList`. */
export interface EmulatorNetwork {
  /** Binance's network id, e.g. 'ETH', 'BSC', 'TRX', 'OPTIMISM'. */
  network: string;
  /** Display name, e.g. 'BNB Smart Chain (BEP20)'. */
  name?: string;
  isDefault?: boolean;
  withdrawEnable?: boolean;
  depositEnable?: boolean;
  withdrawFee?: string;
  withdrawMin?: string;
  withdrawMax?: string;
  /** The step withdrawal amounts must be a multiple of, e.g. '0.00000001'. */
  withdrawIntegerMultiple?: string;
}

/**
 * A coin: either several `networks`, or (the short form) one network given by `network` and the
 * withdraw fields beside it. `decimals` is the emulator's ledger and payout precision.
 */
export interface EmulatorCoin extends Omit<EmulatorNetwork, 'network'> {
  coin: string;
  decimals: number;
  network?: string;
  networks?: EmulatorNetwork[];
}

export interface PayoutRequest {
  withdrawalId: string;
  coin: string;
  network: string;
  address: string;
  /** Decimal amount, in the coin's units. */
  amount: string;
  decimals: number;
}

/** Sends one withdrawal on chain and returns its transaction hash (an ERC-20 payout can replace the native one). */
export type PayoutFn = (w: PayoutRequest) => Promise<Hex>;

export interface BinanceEmulatorOptions {
  apiKey: string;
  apiSecret: string;
  rpcUrl: string;
  /** Where deposits are expected (the exchange's deposit address on the chain). */
  depositAddress: string;
  coins?: EmulatorCoin[];
  /** Free balances by coin, as decimal strings. */
  balances?: Record<string, string>;
  /** Blocks, the deposit's own included, before a deposit is credited. */
  depositConfirmations?: number;
  /** Pays accepted withdrawals; default: nativePayout with `hotWalletKey`. */
  payout?: PayoutFn;
  hotWalletKey?: Hex;
}

export type Fault =
  | { kind: 'drop_after_accept' }
  | { kind: 'hold_after_accept' }
  | { kind: 'status'; status: number; retryAfterSeconds?: number; body?: unknown }
  | { kind: 'delay'; ms: number };

export interface ScriptedFault {
  /** The request path it applies to (e.g. /sapi/v1/capital/withdraw/apply); unset: every path. */
  path?: string;
  fault: Fault;
  /** How many requests it hits; unset: every request until cleared. */
  times?: number;
}

export interface EmulatedWithdrawal {
  id: string;
  withdrawOrderId: string | null;
  coin: string;
  network: string;
  address: string;
  amount: string;
  status: number;
  txId: string | null;
  applyTime: number;
  completeTime: number | null;
  info: string;
}

export interface EmulatedDeposit {
  id: string;
  coin: string;
  network: string;
  address: string;
  amount: string;
  txId: string;
  blockNumber: bigint;
  status: number;
  insertTime: number;
  confirmTimes: string;
}

export interface SeenRequest {
  method: string;
  path: string;
  status: number | 'dropped' | 'held';
  at: number;
}

const DEFAULT_COINS: EmulatorCoin[] = [{ coin: 'ETH', network: 'ETH', decimals: 18, withdrawFee: '0', withdrawMin: '0.000001', withdrawMax: '1000', withdrawIntegerMultiple: '0.00000001' }];

/** A coin's networks, the short form expanded; the first is the default unless one says isDefault. */
function networksOf(c: EmulatorCoin): Required<EmulatorNetwork>[] {
  const list = c.networks ?? [{ ...c, network: c.network ?? c.coin }];
  const hasDefault = list.some((n) => n.isDefault);
  return list.map((n, i) => ({
    network: n.network,
    name: n.name ?? n.network,
    isDefault: hasDefault ? n.isDefault === true : i === 0,
    withdrawEnable: n.withdrawEnable ?? true,
    depositEnable: n.depositEnable ?? true,
    withdrawFee: n.withdrawFee ?? '0',
    withdrawMin: n.withdrawMin ?? '0',
    withdrawMax: n.withdrawMax ?? '1000000',
    withdrawIntegerMultiple: n.withdrawIntegerMultiple ?? '0.00000001',
  }));
}
const MAX_RECV_WINDOW = 60_000;
const DEFAULT_RECV_WINDOW = 5_000;
const SEVEN_DAYS_MS = 7 * 86_400_000;

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: number,
    msg: string,
  ) {
    super(msg);
  }
}

/** The default payout: a native-coin transfer from the hot wallet, sent through viem. */
export function nativePayout(rpcUrl: string, hotWalletKey: Hex): PayoutFn {
  const account = privateKeyToAccount(hotWalletKey);
  const wallet = createWalletClient({ account, transport: http(rpcUrl, { retryCount: 0 }) });
  let queue: Promise<unknown> = Promise.resolve();
  return (w) => {
    // One sender: payouts go out one after the other, so their nonces never collide.
    const sent = queue.then(() => wallet.sendTransaction({ chain: null, to: w.address as Hex, value: parseUnits(w.amount, w.decimals) }));
    queue = sent.catch(() => {});
    return sent;
  };
}

/**
 * An ERC-20 payout: `transfer(address, amount)` on `token` from the hot wallet, for a coin the
 * exchange pays out as a token (e.g. USDC on the local chain).
 */
export function erc20Payout(rpcUrl: string, hotWalletKey: Hex, token: Hex): PayoutFn {
  const account = privateKeyToAccount(hotWalletKey);
  const wallet = createWalletClient({ account, transport: http(rpcUrl, { retryCount: 0 }) });
  let queue: Promise<unknown> = Promise.resolve();
  return (w) => {
    const sent = queue.then(() =>
      wallet.writeContract({ chain: null, address: token, abi: erc20Abi, functionName: 'transfer', args: [w.address as Hex, parseUnits(w.amount, w.decimals)] }),
    );
    queue = sent.catch(() => {});
    return sent;
  };
}

export class BinanceEmulator {
  readonly withdrawals: EmulatedWithdrawal[] = [];
  readonly deposits: EmulatedDeposit[] = [];
  readonly requests: SeenRequest[] = [];
  /** Every withdraw/apply received, with its withdrawOrderId, accepted or not. */
  readonly applies: Array<{ withdrawOrderId: string | null; accepted: boolean }> = [];
  /** The emulator's clock offset, in ms (a test can make the client's timestamps look stale). */
  clockSkewMs = 0;
  #server: Listening | null = null;
  #url = '';
  #faults: ScriptedFault[] = [];
  #balances = new Map<string, bigint>();
  #coins: EmulatorCoin[];
  #chain: PublicClient;
  #payout: PayoutFn;
  #payouts = new Map<string, Promise<void>>();
  #scannedTo = 0n;
  #held = new Set<ServerResponse>();
  #nextId = 1;

  constructor(private readonly opts: BinanceEmulatorOptions) {
    this.#coins = opts.coins ?? DEFAULT_COINS;
    this.#chain = createPublicClient({ transport: http(opts.rpcUrl, { retryCount: 0 }), cacheTime: 0 });
    if (!opts.payout && !opts.hotWalletKey) throw new TypeError('BinanceEmulator needs payout or hotWalletKey');
    this.#payout = opts.payout ?? nativePayout(opts.rpcUrl, opts.hotWalletKey!);
    for (const [coin, amount] of Object.entries(opts.balances ?? {})) this.#balances.set(coin, this.#units(coin, amount));
  }

  get url(): string {
    return this.#url;
  }

  async start(): Promise<this> {
    // Deposits made before the emulator started are not this exchange's business.
    this.#scannedTo = await this.#chain.getBlockNumber();
    this.#server = await listenOnLoopback(createServer((req, res) => void this.#handle(req, res)));
    this.#url = this.#server.url;
    return this;
  }

  async stop(): Promise<void> {
    for (const res of this.#held) res.socket?.destroy();
    this.#held.clear();
    await Promise.allSettled([...this.#payouts.values()]);
    if (!this.#server) return;
    await this.#server.stop();
    this.#server = null;
  }

  fault(f: ScriptedFault): void {
    this.#faults.push({ ...f });
  }

  clearFaults(): void {
    this.#faults = [];
  }

  balance(coin: string): string {
    return this.#format(coin, this.#balances.get(coin) ?? 0n);
  }

  setBalance(coin: string, amount: string): void {
    this.#balances.set(coin, this.#units(coin, amount));
  }

  withdrawalsByOrderId(withdrawOrderId: string): EmulatedWithdrawal[] {
    return this.withdrawals.filter((w) => w.withdrawOrderId === withdrawOrderId);
  }

  /** Waits for every payout in flight (for a test about to check the chain). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#payouts.values()]);
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const body = await readBody(req);
    const seen: SeenRequest = { method: req.method ?? 'GET', path: url.pathname, status: 0, at: Date.now() };
    this.requests.push(seen);
    const fault = this.#takeFault(url.pathname);
    try {
      if (fault?.kind === 'delay') await sleep(fault.ms);
      if (fault?.kind === 'status') {
        const headers: Record<string, string> = {};
        if (fault.retryAfterSeconds !== undefined) headers['retry-after'] = String(fault.retryAfterSeconds);
        const b = fault.body ?? (fault.status === 429 || fault.status === 418 ? { code: -1003, msg: 'Too many requests; current limit is exceeded.' } : { code: -1001, msg: 'Internal error; unable to process your request. Please try again.' });
        seen.status = fault.status;
        return send(res, fault.status, b, headers);
      }
      const answer = await this.#route(req.method ?? 'GET', url, body, req.headers);
      if (fault?.kind === 'drop_after_accept') {
        seen.status = 'dropped';
        res.socket?.destroy();
        return;
      }
      if (fault?.kind === 'hold_after_accept') {
        seen.status = 'held';
        this.#held.add(res);
        return;
      }
      seen.status = 200;
      send(res, 200, answer);
    } catch (err) {
      if (err instanceof ApiError) {
        seen.status = err.status;
        return send(res, err.status, { code: err.code, msg: err.message });
      }
      seen.status = 500;
      send(res, 500, { code: -1000, msg: `An unknown error occurred while processing the request. ${(err as Error).message}` });
    }
  }

  #takeFault(path: string): Fault | null {
    const i = this.#faults.findIndex((f) => f.path === undefined || f.path === path);
    if (i < 0) return null;
    const f = this.#faults[i]!;
    if (f.times !== undefined && --f.times <= 0) this.#faults.splice(i, 1);
    return f.fault;
  }

  async #route(method: string, url: URL, body: string, headers: IncomingMessage['headers']): Promise<unknown> {
    const route = `${method} ${url.pathname}`;
    switch (route) {
      case 'GET /api/v3/time':
        return { serverTime: this.#now() };
      case 'GET /api/v3/exchangeInfo':
        return { timezone: 'UTC', serverTime: this.#now(), rateLimits: [], exchangeFilters: [], symbols: [] };
    }
    const params = this.#verify(url, body, headers);
    switch (route) {
      case 'GET /api/v3/account':
        await this.#scanDeposits();
        return {
          updateTime: this.#now(),
          accountType: 'SPOT',
          balances: this.#coins.map((c) => ({ asset: c.coin, free: this.balance(c.coin), locked: '0' })),
        };
      case 'GET /sapi/v1/capital/config/getall':
        return this.#coins.map((c) => ({
          coin: c.coin,
          name: c.coin,
          depositAllEnable: networksOf(c).some((n) => n.depositEnable),
          withdrawAllEnable: networksOf(c).some((n) => n.withdrawEnable),
          free: this.balance(c.coin),
          locked: '0',
          freeze: '0',
          withdrawing: '0',
          ipoing: '0',
          ipoable: '0',
          storage: '0',
          isLegalMoney: false,
          trading: true,
          networkList: networksOf(c).map((n) => ({
            network: n.network,
            coin: c.coin,
            withdrawIntegerMultiple: n.withdrawIntegerMultiple,
            isDefault: n.isDefault,
            depositEnable: n.depositEnable,
            withdrawEnable: n.withdrawEnable,
            depositDesc: '',
            withdrawDesc: n.withdrawEnable ? '' : 'Wallet Maintenance, Withdrawal Suspended',
            specialTips: '',
            specialWithdrawTips: '',
            name: n.name,
            resetAddressStatus: false,
            addressRegex: '^(0x)[0-9A-Fa-f]{40}$',
            addressRule: '',
            memoRegex: '',
            withdrawFee: n.withdrawFee,
            withdrawMin: n.withdrawMin,
            withdrawMax: n.withdrawMax,
            depositDust: '0',
            minConfirm: this.opts.depositConfirmations ?? 1,
            unLockConfirm: 0,
            sameAddress: false,
            estimatedArrivalTime: 5,
            busy: false,
          })),
        }));
      case 'GET /sapi/v1/capital/deposit/address':
        return { coin: params.get('coin'), address: this.opts.depositAddress, tag: '', url: '' };
      case 'POST /sapi/v1/capital/withdraw/apply':
        return this.#apply(params);
      case 'GET /sapi/v1/capital/withdraw/history':
        return this.#withdrawHistory(params);
      case 'GET /sapi/v1/capital/deposit/hisrec':
        return this.#depositHistory(params);
      default:
        throw new ApiError(404, -1000, `unsupported endpoint ${route}`);
    }
  }

  /** Checks key, timestamp window and signature; returns every parameter of the request. */
  #verify(url: URL, body: string, headers: IncomingMessage['headers']): URLSearchParams {
    if (headers['x-mbx-apikey'] !== this.opts.apiKey) throw new ApiError(401, -2015, 'Invalid API-key, IP, or permissions for action.');
    const query = url.search.startsWith('?') ? url.search.slice(1) : url.search;
    const total = query + body;
    const m = /(^|&)signature=([0-9a-fA-F]+)$/.exec(total);
    if (!m) throw new ApiError(400, -1102, "Mandatory parameter 'signature' was not sent, was empty/null, or malformed.");
    const signed = total.slice(0, m.index);
    const expected = createHmac('sha256', this.opts.apiSecret).update(signed).digest();
    const given = Buffer.from(m[2]!, 'hex');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new ApiError(400, -1022, 'Signature for this request is not valid.');
    const params = new URLSearchParams(signed.replace(/^&/, ''));
    for (const [k, v] of new URLSearchParams(query)) if (!params.has(k)) params.set(k, v);
    const timestamp = Number(params.get('timestamp'));
    const recvWindow = Math.min(Number(params.get('recvWindow') ?? DEFAULT_RECV_WINDOW), MAX_RECV_WINDOW);
    const now = this.#now();
    if (!Number.isFinite(timestamp) || timestamp >= now + 1000 || now - timestamp > recvWindow) {
      throw new ApiError(400, -1021, 'Timestamp for this request is outside of the recvWindow.');
    }
    return params;
  }

  #apply(params: URLSearchParams): unknown {
    const withdrawOrderId = params.get('withdrawOrderId');
    const record = (accepted: boolean) => this.applies.push({ withdrawOrderId, accepted });
    const coin = this.#coins.find((c) => c.coin === params.get('coin'));
    if (!coin) return record(false), reject(-4018, "We don't have this asset.");
    const networks = networksOf(coin);
    // Without `network`, Binance uses the coin's default network.
    const net = params.has('network') ? networks.find((n) => n.network === params.get('network')) : networks.find((n) => n.isDefault);
    // Not confirmed: the code Binance gives an unknown or suspended network. -4019 and its message
    // are Binance's for an asset closed for withdrawal (its error table, as quoted by ccxt 4.5.84).
    if (!net || !net.withdrawEnable) return record(false), reject(-4019, 'Current asset is not open for withdrawal.');
    const network = net.network;
    const address = params.get('address') ?? '';
    if (!/^0x[0-9a-fA-F]{40}$/.test(address)) return record(false), reject(-4007, 'Address validation is not passed.');
    if (withdrawOrderId && this.withdrawals.some((w) => w.withdrawOrderId === withdrawOrderId)) {
      return record(false), reject(-4000, 'Duplicate withdrawOrderId.');
    }
    const amountText = params.get('amount') ?? '';
    if (!/^[0-9]+(\.[0-9]+)?$/.test(amountText)) return record(false), reject(-1100, "Illegal characters found in parameter 'amount'.");
    // The step is checked exactly on the decimal text, before any conversion could round it.
    // -4021's message is Binance's template ("Asset withdrawal must be an %s multiple of %s."); what
    // its two placeholders hold is not documented: here the network and its withdrawIntegerMultiple.
    if (!multipleOf(amountText, net.withdrawIntegerMultiple)) {
      return record(false), reject(-4021, `Asset withdrawal must be an ${network} multiple of ${net.withdrawIntegerMultiple}.`);
    }
    // The ledger keeps `decimals` digits; parseUnits would round a longer amount (a test set-up error).
    if ((amountText.split('.')[1]?.length ?? 0) > coin.decimals) throw new Error(`${amountText} has more digits than the emulated ${coin.coin} ledger (${coin.decimals})`);
    const amount = this.#units(coin.coin, amountText);
    if (amount < this.#units(coin.coin, net.withdrawMin)) return record(false), reject(-4022, `Not less than the minimum pick-up quantity ${net.withdrawMin}.`);
    const fee = this.#units(coin.coin, net.withdrawFee);
    const free = this.#balances.get(coin.coin) ?? 0n;
    if (free < amount + fee) return record(false), reject(-4026, 'You have insufficient balance.');
    this.#balances.set(coin.coin, free - amount - fee);
    record(true);
    const w: EmulatedWithdrawal = {
      id: randomUUID().replaceAll('-', ''),
      withdrawOrderId,
      coin: coin.coin,
      network,
      address,
      amount: this.#format(coin.coin, amount),
      status: 4,
      txId: null,
      applyTime: this.#now(),
      completeTime: null,
      info: '',
    };
    this.withdrawals.push(w);
    this.#payouts.set(
      w.id,
      this.#payout({ withdrawalId: w.id, coin: w.coin, network: w.network, address: w.address, amount: w.amount, decimals: coin.decimals }).then(
        (hash) => void (w.txId = hash),
        (err) => {
          w.status = 5;
          w.info = `payout failed: ${(err as Error).message.split('\n')[0]}`;
          this.#balances.set(coin.coin, (this.#balances.get(coin.coin) ?? 0n) + amount + fee);
        },
      ),
    );
    return { id: w.id };
  }

  async #withdrawHistory(params: URLSearchParams): Promise<unknown> {
    const window = timeWindow(params);
    const orderId = params.get('withdrawOrderId');
    if (orderId && window.end - window.start > SEVEN_DAYS_MS) throw new ApiError(400, -1127, 'More than 7 days between startTime and endTime.');
    await this.settled();
    await this.#advanceWithdrawals();
    const ids = params.get('idList')?.split(',');
    const coin = params.get('coin');
    const status = params.get('status');
    return this.withdrawals
      .filter((w) => (!orderId || w.withdrawOrderId === orderId) && (!ids || ids.includes(w.id)) && (!coin || w.coin === coin))
      .filter((w) => (status === null || String(w.status) === status) && w.applyTime >= window.start && w.applyTime <= window.end)
      .map((w) => ({
        id: w.id,
        amount: w.amount,
        transactionFee: networksOf(this.#coins.find((c) => c.coin === w.coin)!).find((n) => n.network === w.network)?.withdrawFee ?? '0',
        coin: w.coin,
        status: w.status,
        address: w.address,
        ...(w.txId ? { txId: w.txId } : { txId: '' }),
        applyTime: binanceTime(w.applyTime),
        network: w.network,
        transferType: 0,
        ...(w.withdrawOrderId ? { withdrawOrderId: w.withdrawOrderId } : {}),
        info: w.info,
        confirmNo: 0,
        walletType: 0,
        ...(w.completeTime ? { completeTime: binanceTime(w.completeTime) } : {}),
      }));
  }

  async #advanceWithdrawals(): Promise<void> {
    for (const w of this.withdrawals) {
      if (w.status !== 4 || !w.txId) continue;
      try {
        const receipt = await this.#chain.getTransactionReceipt({ hash: w.txId as Hex });
        w.status = receipt.status === 'success' ? 6 : 5;
        w.completeTime = this.#now();
        if (receipt.status !== 'success') w.info = 'payout reverted';
      } catch {
        // not mined yet
      }
    }
  }

  async #depositHistory(params: URLSearchParams): Promise<unknown> {
    await this.#scanDeposits();
    const window = timeWindow(params);
    const txId = params.get('txId');
    const coin = params.get('coin');
    const status = params.get('status');
    return this.deposits
      .filter((d) => (!txId || d.txId.toLowerCase() === txId.toLowerCase()) && (!coin || d.coin === coin))
      .filter((d) => (status === null || String(d.status) === status) && d.insertTime >= window.start && d.insertTime <= window.end)
      .map((d) => ({
        id: d.id,
        amount: d.amount,
        coin: d.coin,
        network: d.network,
        status: d.status,
        address: d.address,
        addressTag: '',
        txId: d.txId,
        insertTime: d.insertTime,
        transferType: 0,
        confirmTimes: d.confirmTimes,
        unlockConfirm: 0,
        walletType: 0,
      }));
  }

  /** Reads the blocks mined since the last look: new transfers to the deposit address, confirmations of known ones. */
  async #scanDeposits(): Promise<void> {
    const head = await this.#chain.getBlockNumber();
    const native = this.#coins[0]!;
    const to = this.opts.depositAddress.toLowerCase();
    for (let n = this.#scannedTo + 1n; n <= head; n++) {
      const block = await this.#chain.getBlock({ blockNumber: n, includeTransactions: true });
      for (const tx of block.transactions) {
        if (tx.to?.toLowerCase() !== to || tx.value === 0n) continue;
        this.deposits.push({
          id: String(this.#nextId++),
          coin: native.coin,
          network: networksOf(native)[0]!.network,
          address: this.opts.depositAddress,
          amount: formatUnits(tx.value, native.decimals),
          txId: tx.hash,
          blockNumber: n,
          status: 0,
          insertTime: this.#now(),
          confirmTimes: '',
        });
      }
    }
    if (head > this.#scannedTo) this.#scannedTo = head;
    const needed = BigInt(this.opts.depositConfirmations ?? 1);
    for (const d of this.deposits) {
      const confirmations = head - d.blockNumber + 1n;
      d.confirmTimes = `${confirmations < needed ? confirmations : needed}/${needed}`;
      if (d.status === 0 && confirmations >= needed) {
        d.status = 1;
        this.#balances.set(d.coin, (this.#balances.get(d.coin) ?? 0n) + this.#units(d.coin, d.amount));
      }
    }
  }

  #now(): number {
    return Date.now() + this.clockSkewMs;
  }

  #units(coin: string, amount: string): bigint {
    return parseUnits(amount, this.#coins.find((c) => c.coin === coin)?.decimals ?? 18);
  }

  #format(coin: string, units: bigint): string {
    return formatUnits(units, this.#coins.find((c) => c.coin === coin)?.decimals ?? 18);
  }
}

/** Whether decimal text `amount` is a whole multiple of decimal text `step`, exactly. */
function multipleOf(amount: string, step: string): boolean {
  const scale = Math.max(amount.split('.')[1]?.length ?? 0, step.split('.')[1]?.length ?? 0);
  const units = (v: string) => {
    const [i, f = ''] = v.split('.');
    return BigInt(i! + f.padEnd(scale, '0'));
  };
  const s = units(step);
  return s > 0n && units(amount) % s === 0n;
}

function reject(code: number, msg: string): never {
  throw new ApiError(400, code, msg);
}

function timeWindow(params: URLSearchParams): { start: number; end: number } {
  const start = params.has('startTime') ? Number(params.get('startTime')) : 0;
  const end = params.has('endTime') ? Number(params.get('endTime')) : Number.MAX_SAFE_INTEGER;
  return { start, end };
}

/** Binance's "YYYY-MM-DD HH:mm:ss" in UTC. */
function binanceTime(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json;charset=UTF-8', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startBinanceEmulator(opts: BinanceEmulatorOptions): Promise<BinanceEmulator> {
  return new BinanceEmulator(opts).start();
}
