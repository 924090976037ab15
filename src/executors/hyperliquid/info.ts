import { Agent, request } from 'undici';
import type { HyperliquidConfig } from './config.ts';

/**
 * A client of Hyperliquid's info API: `POST {info_url}` with `{"type":"clearinghouseState","user":"0x…"}`.
 * Amounts come back as decimal strings in USD and stay decimals here (never floats). It never
 * throws: every answer, and every failure to get one, is a value.
 */

/** The fields of clearinghouseState the lane reads. */
export interface ClearinghouseState {
  /** USD the account may withdraw: where a deposit's credit shows. A decimal string. */
  withdrawable: string;
  /** The state's time, ms since the epoch. */
  time: number;
  accountValue: string | null;
}

export type InfoAnswer =
  | { kind: 'ok'; state: ClearinghouseState }
  | { kind: 'unavailable'; detail: string }
  | { kind: 'rejected'; status: number; detail: string };

export class HyperliquidInfoClient {
  readonly #url: string;
  readonly #timeoutMs: number;
  readonly #agent: Agent;

  constructor(cfg: Pick<HyperliquidConfig, 'info_url' | 'timeout_ms'>) {
    this.#url = cfg.info_url;
    this.#timeoutMs = cfg.timeout_ms;
    this.#agent = new Agent({ connect: { timeout: cfg.timeout_ms } });
  }

  async clearinghouseState(user: string): Promise<InfoAnswer> {
    let status: number;
    let text: string;
    try {
      const res = await request(this.#url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ type: 'clearinghouseState', user: user.toLowerCase() }),
        dispatcher: this.#agent,
        headersTimeout: this.#timeoutMs,
        bodyTimeout: this.#timeoutMs,
      });
      status = res.statusCode;
      text = await res.body.text();
    } catch (err) {
      return { kind: 'unavailable', detail: `the info API did not answer: ${(err as Error).message}` };
    }
    if (status >= 500 || status === 429) return { kind: 'unavailable', detail: `the info API answered ${status}` };
    if (status < 200 || status >= 300) return { kind: 'rejected', status, detail: `the info API answered ${status}: ${text.slice(0, 200)}` };
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return { kind: 'unavailable', detail: `the info API answered ${status} with a body that is not JSON` };
    }
    const state = parseState(body);
    return state ? { kind: 'ok', state } : { kind: 'unavailable', detail: 'the clearinghouseState answer has no decimal withdrawable and numeric time' };
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }
}

function parseState(body: unknown): ClearinghouseState | null {
  if (body === null || typeof body !== 'object') return null;
  const b = body as Record<string, unknown>;
  if (typeof b.withdrawable !== 'string' || parseDecimal(b.withdrawable) === null) return null;
  if (typeof b.time !== 'number' || !Number.isFinite(b.time)) return null;
  const summary = b.marginSummary as Record<string, unknown> | undefined;
  const accountValue = summary && typeof summary.accountValue === 'string' ? summary.accountValue : null;
  return { withdrawable: b.withdrawable, time: b.time, accountValue };
}

/** An exact decimal: value = units / 10^scale. */
export interface Decimal {
  units: bigint;
  scale: number;
}

const DECIMAL = /^(-?)([0-9]+)(?:\.([0-9]+))?$/;

/** "12.5" -> {125n, 1}; null for anything but a plain decimal string (no exponent, no float). */
export function parseDecimal(text: string): Decimal | null {
  const m = DECIMAL.exec(text);
  if (!m || text.length > 80) return null;
  const fraction = m[3] ?? '';
  const units = BigInt(m[2]! + fraction);
  return { units: m[1] ? -units : units, scale: fraction.length };
}

const rescale = (d: Decimal, scale: number) => d.units * 10n ** BigInt(scale - d.scale);

/** a - b, exactly. */
export function subtract(a: Decimal, b: Decimal): Decimal {
  const scale = Math.max(a.scale, b.scale);
  return { units: rescale(a, scale) - rescale(b, scale), scale };
}

/** -1, 0 or 1 as a < b, a = b, a > b. */
export function compare(a: Decimal, b: Decimal): number {
  const scale = Math.max(a.scale, b.scale);
  const x = rescale(a, scale);
  const y = rescale(b, scale);
  return x < y ? -1 : x > y ? 1 : 0;
}

export function formatDecimal(d: Decimal): string {
  const negative = d.units < 0n;
  const digits = (negative ? -d.units : d.units).toString().padStart(d.scale + 1, '0');
  const whole = digits.slice(0, digits.length - d.scale);
  const fraction = digits.slice(digits.length - d.scale).replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
}
