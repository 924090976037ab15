import { FerryError, ValidationError } from '../errors.ts';
import { destinationRules, literalRefusal, normalizeHost, type DestinationSettings } from './destinations.ts';

/**
 * Checked when a movement is created with a callback_url and when a callback destination is
 * registered: only http(s); when an allow-list is configured (FERRY_CALLBACK_ALLOWED_HOSTS) the
 * hostname must be on it (an empty list allows nothing); and a literal address must be one a
 * delivery may connect to, by the delivery's own rules (destinations.ts: loopback, private,
 * link-local... refused unless FERRY_CALLBACK_ALLOWED_NETWORKS or the host list names it), so a
 * URL that could never be delivered to is refused now rather than dead-lettered later. A name is
 * checked when a delivery resolves it. Returns the parsed URL.
 */
export function assertCallbackUrlAllowed(url: string, settings: DestinationSettings, field = 'callback_url'): URL {
  const allowedHosts = settings.callbackAllowedHosts;
  // The URL parser would quietly drop these, and the stored URL would differ from the one used.
  if (url !== url.trim() || /[\s\u0000-\u001f\u007f]/.test(url)) {
    throw new ValidationError(`${field} must not contain spaces or control characters`, { field });
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ValidationError(`${field} is not a valid URL`, { field });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ValidationError(`${field} must use http or https`, { field, protocol: parsed.protocol });
  }
  if (!parsed.hostname) {
    throw new ValidationError(`${field} has no host`, { field });
  }
  if (parsed.port === '0') {
    throw new ValidationError(`${field} port must be between 1 and 65535`, { field, port: 0 });
  }
  if (parsed.username || parsed.password) {
    // Credentials would be stored and shown wherever the URL is; receivers verify the signature instead.
    throw new ValidationError(`${field} must not carry a user name or password`, { field });
  }
  if (allowedHosts) {
    const host = normalizeHost(parsed.hostname);
    if (!allowedHosts.some((h) => normalizeHost(h) === host)) {
      throw new FerryError('CALLBACK_HOST_NOT_ALLOWED', `callback host ${parsed.hostname} is not in the allowed hosts`, {
        field,
        host: parsed.hostname,
        rule: 'FERRY_CALLBACK_ALLOWED_HOSTS',
      });
    }
  }
  const blocked = literalRefusal(destinationRules(settings), parsed);
  if (blocked) {
    throw new FerryError(
      'CALLBACK_ADDRESS_NOT_ALLOWED',
      `callback address ${parsed.hostname} is ${blocked.replace('_', '-')}, and not in FERRY_CALLBACK_ALLOWED_NETWORKS`,
      { field, host: parsed.hostname, address_class: blocked, rule: 'FERRY_CALLBACK_ALLOWED_NETWORKS' },
    );
  }
  return parsed;
}
