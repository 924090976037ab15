import type { Exchange } from 'ccxt';
import type { CexAccountConfig } from '../../config-file.ts';
import { ConfigError } from '../../config.ts';
import { FatalMovementError } from '../errors.ts';
import { sameDecimal } from './decimal.ts';

/**
 * One exchange account as the CEX lane uses it: a ccxt client whose every endpoint points at the
 * account's `base_url` (nothing else is ever contacted: fetch() refuses any other origin before a
 * byte is sent), with the account's API key and secret from the environment.
 *
 * ccxt 4.5.84 turns HTTP 418/429 into DDoSProtection and ignores Retry-After. The status, the
 * Retry-After header and Binance's `{code, msg}` are taken per response by wrapping the instance's
 * handleErrors()/handleHttpStatusCode() hooks (they receive that response's status, headers and
 * body) and attached to the error ccxt throws: race-free, unlike `last_response_headers`, which
 * one instance shares between concurrent calls.
 *
 * The last guard before money moves: fetch() lets a withdraw/apply request out only when it carries
 * exactly the coin, network id and amount submit() checked and approved for its withdrawOrderId
 * (`approved`), and records what it sent. Whatever ccxt did to the request between that check and
 * the wire (rounding, a network code turned into another id), the exchange never receives an
 * amount other than the approved one.
 *
 * ccxt (every exchange of it) takes seconds to load, so it is imported on an account's first call,
 * never by a process that has no exchange account.
 */

type Ccxt = (typeof import('ccxt'))['default'];
// Module-level on purpose: this is a module cache, like import() itself (which caches the module
// for the process anyway); it holds no account, credential or per-runtime state.
let ccxtLoading: Promise<Ccxt> | null = null;
let ccxtLoaded: Ccxt | null = null;

export function loadCcxt(): Promise<Ccxt> {
  ccxtLoading ??= import('ccxt').then((m) => (ccxtLoaded = m.default));
  return ccxtLoading;
}

/** ccxt's module once some account has loaded it (its error classes), else null. */
export function ccxtIfLoaded(): Ccxt | null {
  return ccxtLoaded;
}

export interface CexAccount {
  key: string;
  exchange: 'binance';
  baseUrl: string;
  /** Ferry's network names to the exchange's network ids or ccxt's network codes (networks.ts). */
  networks: Record<string, string>;
  /** The withdrawals submit() approved, by withdrawOrderId, while its withdraw() call runs. */
  approved: Map<string, ApprovedWithdrawal>;
  /** The account's ccxt client, made on first use. */
  client(): Promise<Exchange>;
  /** Replaces every occurrence of the credentials in a text (for error details and logs). */
  redact(text: string): string;
  /** Until when (ms) the exchange asked us to stay away (Retry-After of a 429/418); 0: not asked. */
  blockedUntilMs: number;
  /** The account's `not_found_after_seconds`, in ms (unset: the withdrawal executor's own). */
  notFoundAfterMs?: number;
}

export interface ApprovedWithdrawal {
  coin: string;
  /** The exchange's network id. */
  network: string;
  amount: string;
  /** What went on the wire, once fetch() let the request out. */
  sent?: { coin: string; network: string | null; amount: string; address: string | null };
}

export const WITHDRAW_APPLY_PATH = '/sapi/v1/capital/withdraw/apply';

/** What a failed call told us, taken from its own response. */
export interface ResponseFacts {
  httpStatus?: number;
  retryAfterSeconds?: number;
  exchangeCode?: number;
  exchangeMsg?: string;
}

const FACTS = Symbol('ferry.cex.responseFacts');

export function responseFacts(err: unknown): ResponseFacts {
  return (err && typeof err === 'object' && (err as Record<symbol, ResponseFacts>)[FACTS]) || {};
}

export interface ClientHooks {
  /** Called with every URL ccxt is about to fetch (after the origin check). */
  onRequest?: (url: string) => void;
}

export function createCexAccount(entry: CexAccountConfig, env: NodeJS.ProcessEnv = process.env, hooks: ClientHooks = {}): CexAccount {
  const required = (name: string): string => {
    const value = env[name];
    if (value === undefined || value === '') throw new ConfigError(name, `is not set (cex.accounts ${entry.key} needs it)`);
    return value;
  };
  const apiKey = required(entry.api_key_env);
  const secret = required(entry.api_secret_env);
  const base = new URL(entry.base_url);
  const baseUrl = entry.base_url.replace(/\/+$/, '');
  const approved = new Map<string, ApprovedWithdrawal>();
  const make = async (): Promise<Exchange> => {
    const ccxt = await loadCcxt();
    const client = new ccxt.binance({
      apiKey,
      secret,
      timeout: entry.timeout_ms,
      enableRateLimit: true,
      options: {
        // Only what withdrawals and deposits need: currencies (capital/config/getall) and spot
        // exchangeInfo; no margin, futures or options endpoints, no server-time sync.
        fetchMargins: false,
        fetchMarkets: { types: ['spot'] },
        adjustForTimeDifference: false,
        recvWindow: 10_000,
      },
    });
    // Every REST endpoint ccxt knows for binance, re-rooted at base_url (same paths).
    const api = client.urls.api as Record<string, string>;
    for (const [name, url] of Object.entries(api)) {
      if (typeof url === 'string') api[name] = baseUrl + new URL(url).pathname;
    }
    // ccxt keeps the promise of a failed market load and hands the same rejection to every later
    // call (withdraw and the history reads load markets first): forget it, so the next call retries.
    const origLoad = client.loadMarkets.bind(client);
    client.loadMarkets = async (reload?: boolean, params?: object) => {
      try {
        return await origLoad(reload, params);
      } catch (err) {
        client.marketsLoading = undefined as never;
        throw err;
      }
    };
    const origFetch = client.fetch.bind(client);
    client.fetch = (url: string, method?: string, headers?: unknown, body?: unknown) => {
      if (new URL(url).origin !== base.origin) {
        return Promise.reject(new ccxt.ExchangeError(`refusing to contact ${new URL(url).origin}: account ${entry.key} talks only to its base_url`));
      }
      if (new URL(url).pathname.endsWith(WITHDRAW_APPLY_PATH)) {
        try {
          guardApply(approved, url, body);
        } catch (err) {
          return Promise.reject(err);
        }
      }
      hooks.onRequest?.(url);
      return origFetch(url, method, headers, body);
    };
    const origErrors = client.handleErrors.bind(client);
    client.handleErrors = (code: number, reason: string, url: string, method: string, headers: any, body: string, response: any, rh: any, rb: any) => {
      try {
        return origErrors(code, reason, url, method, headers, body, response, rh, rb);
      } catch (err) {
        throw annotate(err, { httpStatus: code, retryAfterSeconds: retryAfter(headers), ...binanceError(response) });
      }
    };
    const origStatus = client.handleHttpStatusCode.bind(client);
    client.handleHttpStatusCode = (code: number, reason: string, url: string, method: string, body: string) => {
      try {
        return origStatus(code, reason, url, method, body);
      } catch (err) {
        throw annotate(err, { httpStatus: code });
      }
    };
    return client;
  };
  let made: Promise<Exchange> | null = null;
  const secrets = [apiKey, secret].filter((s) => s.length >= 4);
  return {
    key: entry.key,
    exchange: entry.exchange,
    baseUrl,
    networks: entry.networks ?? {},
    approved,
    client: () => (made ??= make()),
    redact: (text) => {
      let out = text.replace(/signature=[0-9a-fA-F]+/g, 'signature=[redacted]');
      for (const s of secrets) out = out.split(s).join('[redacted]');
      return out;
    },
    blockedUntilMs: 0,
    ...(entry.not_found_after_seconds !== undefined ? { notFoundAfterMs: entry.not_found_after_seconds * 1000 } : {}),
  };
}

/** Refuses (before a byte is sent) a withdraw/apply that is not exactly an approved withdrawal. */
function guardApply(approved: Map<string, ApprovedWithdrawal>, url: string, body: unknown): void {
  // ccxt sends withdraw/apply's signed parameters as the form body (rawencode: not percent-encoded).
  const params = new URLSearchParams(typeof body === 'string' ? body : '');
  for (const [k, v] of new URL(url).searchParams) if (!params.has(k)) params.set(k, v);
  const orderId = params.get('withdrawOrderId');
  const expected = orderId ? approved.get(orderId) : undefined;
  const sent = { coin: params.get('coin') ?? '', network: params.get('network'), amount: params.get('amount') ?? '', address: params.get('address') };
  if (!expected) {
    throw new FatalMovementError('CEX_WITHDRAWAL_UNAPPROVED', `refusing a withdraw/apply for withdrawOrderId ${orderId ?? '(none)'}: no approved withdrawal has it; nothing was sent`, { withdraw_order_id: orderId });
  }
  if (sent.coin !== expected.coin || sent.network !== expected.network) {
    throw new FatalMovementError('CEX_NETWORK_MISMATCH', `refusing a withdraw/apply of ${sent.coin} on ${sent.network}: ${expected.coin} on ${expected.network} was approved; nothing was sent`, {
      network: expected.network,
      would_send_network: sent.network,
    });
  }
  if (!sameDecimal(sent.amount, expected.amount)) {
    throw new FatalMovementError('CEX_AMOUNT_PRECISION', `refusing a withdraw/apply of ${sent.amount} ${sent.coin}: ${expected.amount} was approved; nothing was sent`, {
      network: expected.network,
      approved: expected.amount,
      would_send: sent.amount,
    });
  }
  expected.sent = sent;
}

function annotate(err: unknown, facts: ResponseFacts): unknown {
  if (err && typeof err === 'object') {
    const prev = (err as Record<symbol, ResponseFacts>)[FACTS] ?? {};
    Object.defineProperty(err, FACTS, { value: { ...facts, ...prev }, enumerable: false, configurable: true });
  }
  return err;
}

function retryAfter(headers: unknown): number | undefined {
  if (!headers || typeof headers !== 'object') return undefined;
  for (const [k, v] of Object.entries(headers as Record<string, unknown>)) {
    if (k.toLowerCase() !== 'retry-after') continue;
    const text = String(Array.isArray(v) ? v[0] : v).trim();
    if (/^[0-9]+$/.test(text)) return Number(text);
    const date = Date.parse(text);
    if (Number.isFinite(date)) return Math.max(0, Math.ceil((date - Date.now()) / 1000));
  }
  return undefined;
}

function binanceError(response: unknown): Pick<ResponseFacts, 'exchangeCode' | 'exchangeMsg'> {
  if (!response || typeof response !== 'object') return {};
  const r = response as { code?: unknown; msg?: unknown };
  const code = Number(r.code);
  return {
    ...(Number.isFinite(code) ? { exchangeCode: code } : {}),
    ...(typeof r.msg === 'string' ? { exchangeMsg: r.msg } : {}),
  };
}
