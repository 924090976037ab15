import { Agent, request } from 'undici';
import type { GatewayConfig } from './config.ts';

/** One answer of the Gateway API, classified. */
export type GatewayAnswer =
  | { kind: 'ok'; status: number; body: unknown }
  /** A 4xx: the API refused the request (its `message`); nothing was done for it. */
  | { kind: 'refused'; status: number; message: string }
  /** No answer, a 5xx or a body that is not JSON: whether the API acted is not known. */
  | { kind: 'unavailable'; detail: string; delivered: boolean };

// The request certainly never reached the API.
const NOT_DELIVERED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * A client of Circle's Gateway API (docs/gateway-lane.md): `POST /v1/balances` (the unified
 * balance, finalized deposits only) and `POST /v1/transfer` (a signed burn intent for an
 * attestation). It never throws: every answer, and every failure to get one, is a value.
 */
export class GatewayApiClient {
  readonly #base: string;
  readonly #timeoutMs: number;
  readonly #agent: Agent;

  constructor(cfg: Pick<GatewayConfig, 'api_url' | 'request_timeout_ms'>) {
    this.#base = cfg.api_url.replace(/\/+$/, '');
    this.#timeoutMs = cfg.request_timeout_ms;
    this.#agent = new Agent({ connect: { timeout: cfg.request_timeout_ms } });
  }

  /** The depositor's available balance on one domain, as the API counts it (a decimal string in token units). */
  balances(depositor: string, domain: number): Promise<GatewayAnswer> {
    return this.#post('/v1/balances', { token: 'USDC', sources: [{ depositor, domain }] });
  }

  /** One signed burn intent: the attestation, its signature and the fees. */
  transfer(burnIntent: Record<string, unknown>, signature: string): Promise<GatewayAnswer> {
    return this.#post('/v1/transfer', [{ burnIntent, signature }]);
  }

  async #post(path: string, body: unknown): Promise<GatewayAnswer> {
    try {
      const res = await request(`${this.#base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(body),
        dispatcher: this.#agent,
        headersTimeout: this.#timeoutMs,
        bodyTimeout: this.#timeoutMs,
      });
      const text = await res.body.text();
      const status = res.statusCode;
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      if (status >= 400 && status < 500 && status !== 408 && status !== 429) {
        const message = json && typeof json === 'object' && typeof (json as { message?: unknown }).message === 'string' ? (json as { message: string }).message : text.slice(0, 300);
        return { kind: 'refused', status, message: message.slice(0, 500) };
      }
      if (status < 200 || status >= 300) return { kind: 'unavailable', detail: `the Gateway API answered ${status}`, delivered: true };
      if (json === undefined) return { kind: 'unavailable', detail: `the Gateway API answered ${status} with a body that is not JSON`, delivered: true };
      if (json && typeof json === 'object' && (json as { success?: unknown }).success === false) {
        return { kind: 'refused', status, message: String((json as { message?: unknown }).message ?? 'success: false').slice(0, 500) };
      }
      return { kind: 'ok', status, body: json };
    } catch (err) {
      const code = (err as { code?: string }).code;
      return { kind: 'unavailable', detail: `the Gateway API did not answer: ${(err as Error).message.split('\n')[0]}`, delivered: !(code && NOT_DELIVERED.has(code)) };
    }
  }

  async close(): Promise<void> {
    await this.#agent.close();
  }
}
