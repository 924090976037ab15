import { ccxtIfLoaded, responseFacts, type CexAccount } from './client.ts';

/**
 * What a failed exchange call means for a node. Binance's own code decides first (on a loopback or
 * proxy URL ccxt applies only its top-level code table, so e.g. -4026 arrives as BadRequest), then
 * the HTTP status, then ccxt's error class.
 *
 * - `insufficient_balance`, `invalid_address`, `rejected`: a definite refusal, nothing happened;
 * - `rate_limited`: HTTP 429/418 or -1003, nothing happened; come back after `retryAfterSeconds`;
 * - `uncertain`: 5xx, timeout, dropped connection: the exchange may have acted.
 */
export type CexFailure =
  | { kind: 'insufficient_balance'; code: 'CEX_INSUFFICIENT_BALANCE'; detail: string }
  | { kind: 'invalid_address'; code: 'CEX_INVALID_ADDRESS'; detail: string }
  | { kind: 'rate_limited'; code: 'CEX_RATE_LIMITED'; detail: string; retryAfterSeconds: number }
  | { kind: 'uncertain'; code: 'CEX_UNAVAILABLE' | 'CEX_TIMEOUT'; detail: string }
  | { kind: 'rejected'; code: 'CEX_AUTH_REJECTED' | 'CEX_REJECTED' | WithdrawRefusalCode; detail: string };

type WithdrawRefusalCode = 'CEX_WITHDRAW_DISABLED' | 'CEX_AMOUNT_PRECISION' | 'CEX_AMOUNT_BELOW_MINIMUM';

const INSUFFICIENT = new Set([-4024, -4025, -4026]);
const BAD_ADDRESS = new Set([-4007, -4033, -4034, -4035]);
const AUTH = new Set([-1021, -1022, -2014, -2015]);
/**
 * Binance's withdraw refusals that Ferry's own checks should have caught first (messages as in
 * Binance's error table, quoted by ccxt 4.5.84): -4019 "Current asset is not open for withdrawal.",
 * -4021 "Asset withdrawal must be an %s multiple of %s.", -4022 "Not less than the minimum pick-up
 * quantity %s.".
 */
const WITHDRAW_REFUSALS = new Map<number, WithdrawRefusalCode>([
  [-4019, 'CEX_WITHDRAW_DISABLED'],
  [-4021, 'CEX_AMOUNT_PRECISION'],
  [-4022, 'CEX_AMOUNT_BELOW_MINIMUM'],
]);
/** When the exchange rate-limits without saying for how long. */
export const DEFAULT_RETRY_AFTER_SECONDS = 60;

export function classifyCexError(err: unknown, account: Pick<CexAccount, 'redact' | 'baseUrl'>): CexFailure {
  const facts = responseFacts(err);
  const ccxt = ccxtIfLoaded();
  const is = (name: 'DDoSProtection' | 'RateLimitExceeded' | 'InsufficientFunds' | 'InvalidAddress' | 'RequestTimeout' | 'AuthenticationError' | 'NetworkError' | 'BaseError') =>
    ccxt !== null && err instanceof ccxt[name];
  const raw = err instanceof Error ? err.message : String(err);
  const text = facts.exchangeCode !== undefined ? `exchange code ${facts.exchangeCode}: ${facts.exchangeMsg ?? ''} (${raw})` : raw;
  const detail = account.redact(withoutBaseUrl(text, account.baseUrl)).slice(0, 1000);
  const code = facts.exchangeCode;
  const status = facts.httpStatus;
  if (status === 429 || status === 418 || code === -1003 || is('DDoSProtection') || is('RateLimitExceeded')) {
    return { kind: 'rate_limited', code: 'CEX_RATE_LIMITED', detail, retryAfterSeconds: facts.retryAfterSeconds ?? DEFAULT_RETRY_AFTER_SECONDS };
  }
  if ((code !== undefined && INSUFFICIENT.has(code)) || is('InsufficientFunds') || /insufficient balance/i.test(facts.exchangeMsg ?? '')) {
    return { kind: 'insufficient_balance', code: 'CEX_INSUFFICIENT_BALANCE', detail };
  }
  if ((code !== undefined && BAD_ADDRESS.has(code)) || is('InvalidAddress')) {
    return { kind: 'invalid_address', code: 'CEX_INVALID_ADDRESS', detail };
  }
  if (status !== undefined && status >= 500) return { kind: 'uncertain', code: 'CEX_UNAVAILABLE', detail };
  if (is('RequestTimeout')) return { kind: 'uncertain', code: 'CEX_TIMEOUT', detail };
  const refusal = code !== undefined ? WITHDRAW_REFUSALS.get(code) : undefined;
  if (refusal) return { kind: 'rejected', code: refusal, detail };
  if ((code !== undefined && AUTH.has(code)) || is('AuthenticationError')) return { kind: 'rejected', code: 'CEX_AUTH_REJECTED', detail };
  // A 4xx answer is a refusal; no answer at all (network error, reset, dropped socket) is not.
  if (status !== undefined && status >= 400) return { kind: 'rejected', code: 'CEX_REJECTED', detail };
  if (is('NetworkError') || !is('BaseError')) return { kind: 'uncertain', code: 'CEX_UNAVAILABLE', detail };
  return { kind: 'rejected', code: 'CEX_REJECTED', detail };
}

/**
 * ccxt's messages carry the URL it called: the account's base_url (whose host and path prefix may
 * name an internal proxy) and a query of signed parameters. A node's error keeps the endpoint only.
 */
function withoutBaseUrl(text: string, baseUrl: string): string {
  const stripped = baseUrl ? text.split(baseUrl).join('') : text;
  return stripped.replace(/(^|\s)(\/[^\s?]*)\?\S*/g, '$1$2');
}
