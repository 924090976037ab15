import { isIP } from 'node:net';

/**
 * `10.0.0.0/8`, `fd00::/8`, or a single address (a /32 or /128). Its own module: the configuration
 * checks FERRY_CALLBACK_ALLOWED_NETWORKS with it, and must not load the delivery code (undici) to do so.
 */
export function parseCidr(text: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | null {
  const [address = '', prefixText] = text.trim().split('/');
  const family = isIP(address);
  if (family === 0) return null;
  const max = family === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? max : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > max) return null;
  return { address, prefix, family: family === 4 ? 'ipv4' : 'ipv6' };
}
