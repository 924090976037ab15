import { FerryError, ValidationError } from '../errors.ts';

/**
 * Checked when a movement is created with a callback_url: only http(s), and when an allow-list is
 * configured (FERRY_CALLBACK_ALLOWED_HOSTS) the hostname must be on it. An empty list allows nothing.
 * Returns the parsed URL.
 */
export function assertCallbackUrlAllowed(url: string, allowedHosts?: string[]): URL {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ValidationError('callback_url is not a valid URL', { field: 'callback_url' });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ValidationError('callback_url must use http or https', { field: 'callback_url', protocol: parsed.protocol });
  }
  if (!parsed.hostname) {
    throw new ValidationError('callback_url has no host', { field: 'callback_url' });
  }
  if (allowedHosts) {
    const host = normalizeHost(parsed.hostname);
    if (!allowedHosts.some((h) => normalizeHost(h) === host)) {
      throw new FerryError('CALLBACK_HOST_NOT_ALLOWED', `callback host ${parsed.hostname} is not in the allowed hosts`, {
        field: 'callback_url',
        host: parsed.hostname,
      });
    }
  }
  return parsed;
}

// URL keeps IPv6 hosts in brackets and a fully qualified name may end in a dot; neither should
// decide whether a host matches the configured list.
function normalizeHost(host: string): string {
  return host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
}
