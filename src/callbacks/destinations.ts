import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { parseCidr } from './cidr.ts';
import { Agent, type Dispatcher } from 'undici';

/**
 * Where callbacks may be delivered. A requester chooses a movement's callback_url, so without a
 * check a callback is a request Ferry makes on the requester's behalf from inside the network: to
 * loopback services, the cloud metadata address, private hosts. Every delivery therefore resolves
 * the host itself and refuses an address in a range that is not the public internet, unless an
 * operator named that host (FERRY_CALLBACK_ALLOWED_HOSTS) or network (FERRY_CALLBACK_ALLOWED_NETWORKS).
 *
 * The check runs in the connection's own DNS lookup, so the address checked is the address
 * connected to: a name that resolves to a public address for the check and to 127.0.0.1 for the
 * connection (DNS rebinding) gets nowhere. Literal addresses are checked before connecting.
 */

export type AddressClass = 'loopback' | 'link_local' | 'private' | 'unique_local' | 'multicast' | 'unspecified' | 'reserved';

const RANGES: Array<[AddressClass, 'ipv4' | 'ipv6', string, number]> = [
  ['unspecified', 'ipv4', '0.0.0.0', 8],
  ['loopback', 'ipv4', '127.0.0.0', 8],
  ['private', 'ipv4', '10.0.0.0', 8],
  ['private', 'ipv4', '172.16.0.0', 12],
  ['private', 'ipv4', '192.168.0.0', 16],
  ['private', 'ipv4', '100.64.0.0', 10], // carrier-grade NAT
  ['link_local', 'ipv4', '169.254.0.0', 16], // cloud metadata lives here
  ['reserved', 'ipv4', '192.0.0.0', 24],
  ['reserved', 'ipv4', '198.18.0.0', 15],
  ['multicast', 'ipv4', '224.0.0.0', 4],
  ['reserved', 'ipv4', '240.0.0.0', 4], // includes 255.255.255.255
  ['unspecified', 'ipv6', '::', 128],
  ['loopback', 'ipv6', '::1', 128],
  ['unique_local', 'ipv6', 'fc00::', 7],
  ['link_local', 'ipv6', 'fe80::', 10],
  ['multicast', 'ipv6', 'ff00::', 8],
];

const blocked = new Map<AddressClass, BlockList>();
for (const [cls, family, net, prefix] of RANGES) {
  const list = blocked.get(cls) ?? new BlockList();
  list.addSubnet(net, prefix, family);
  blocked.set(cls, list);
}

/** The class of an address that is not on the public internet, or null for a public one. */
export function classifyAddress(address: string): AddressClass | null {
  const family = isIP(address);
  if (family === 0) throw new TypeError(`not an IP address: ${address}`);
  if (family === 6) {
    // :: and ::1 first: they are in ::/96 too, but are IPv6's own unspecified and loopback.
    for (const [cls, list] of blocked) if (list.check(address, 'ipv6')) return cls;
    // An IPv6 form that embeds an IPv4 address reaches (or is translated to) that IPv4 host.
    const v4 = embeddedIpv4(address);
    return v4 === null ? null : classifyAddress(v4);
  }
  for (const [cls, list] of blocked) if (list.check(address, 'ipv4')) return cls;
  return null;
}

/**
 * The IPv4 address an IPv6 address stands for, or null: IPv4-mapped (::ffff:a.b.c.d),
 * IPv4-translated (::ffff:0:a.b.c.d), IPv4-compatible (::a.b.c.d, deprecated but still routed by
 * some stacks), NAT64 (64:ff9b::a.b.c.d, RFC 6052) and 6to4 (2002:AABB:CCDD::/48, RFC 3056).
 */
export function embeddedIpv4(address: string): string | null {
  const g = ipv6Groups(address);
  if (!g) return null;
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  if (zero(0, 5) && g[5] === 0xffff) return v4(g[6]!, g[7]!);
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return v4(g[6]!, g[7]!);
  if (zero(0, 6)) return v4(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return v4(g[6]!, g[7]!);
  if (g[0] === 0x2002) return v4(g[1]!, g[2]!);
  return null;
}

/** The eight 16-bit groups of an IPv6 address (`::` expanded, a trailing dotted quad read), or null. */
function ipv6Groups(address: string): number[] | null {
  if (isIP(address) !== 6) return null;
  let text = address.toLowerCase().replace(/%.*$/, '');
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const parts = (t: string) => (t === '' ? [] : t.split(':').map((h) => parseInt(h, 16)));
  const left = parts(head);
  const right = tail === undefined ? [] : parts(tail);
  const fill = tail === undefined ? 0 : 8 - left.length - right.length;
  const groups = [...left, ...Array<number>(fill).fill(0), ...right];
  return groups.length === 8 && groups.every((x) => Number.isInteger(x) && x >= 0 && x <= 0xffff) ? groups : null;
}

export interface DestinationRules {
  /** Hosts an operator named: delivered to whatever they resolve to. Lowercase, no brackets. */
  allowedHosts: readonly string[];
  /** Networks an operator named (CIDR): addresses in them are delivered to even if not public. */
  allowedNetworks: BlockList;
}

export interface DestinationPolicy extends DestinationRules {
  /** The HTTP client whose connections resolve names through guardedLookup(these rules). */
  dispatcher: Dispatcher;
}

export interface DestinationSettings {
  callbackAllowedHosts?: string[];
  callbackAllowedNetworks?: string[];
}

/** The rules of FERRY_CALLBACK_ALLOWED_HOSTS and FERRY_CALLBACK_ALLOWED_NETWORKS: one rule set for creation and delivery. */
export function destinationRules(config: DestinationSettings): DestinationRules {
  const allowedNetworks = new BlockList();
  for (const cidr of config.callbackAllowedNetworks ?? []) {
    const parsed = parseCidr(cidr);
    if (!parsed) throw new TypeError(`not a network: ${cidr}`);
    allowedNetworks.addSubnet(parsed.address, parsed.prefix, parsed.family);
  }
  return { allowedHosts: (config.callbackAllowedHosts ?? []).map(normalizeHost), allowedNetworks };
}

/** The policy from FERRY_CALLBACK_ALLOWED_HOSTS and FERRY_CALLBACK_ALLOWED_NETWORKS. */
export function destinationPolicy(config: DestinationSettings): DestinationPolicy {
  const rules = destinationRules(config);
  return { ...rules, dispatcher: new Agent({ connect: { lookup: guardedLookup(rules) } }) };
}

/**
 * Null when a callback URL's host may be connected to as far as can be told before connecting: a
 * literal address is checked here; a name is checked when the connection resolves it.
 */
export function literalRefusal(policy: DestinationRules, url: URL): AddressClass | null {
  const host = normalizeHost(url.hostname);
  return isIP(host) ? refusal(policy, host, host) : null;
}

export class DestinationBlockedError extends Error {
  readonly code = 'EFERRY_DESTINATION_BLOCKED';
  constructor(readonly addressClass: AddressClass) {
    super(`callback destination resolves to a ${addressClass.replace('_', '-')} address`);
    this.name = 'DestinationBlockedError';
  }
}

/** Null when the address may be connected to for this host; else why not. */
export function refusal(policy: DestinationRules, host: string, address: string): AddressClass | null {
  if (policy.allowedHosts.includes(normalizeHost(host))) return null;
  const cls = classifyAddress(address);
  if (cls === null) return null;
  const family = isIP(address) === 4 ? 'ipv4' : 'ipv6';
  if (policy.allowedNetworks.check(address, family)) return null;
  // An IPv6 form of an IPv4 address is as allowed as that address (64:ff9b::a0a:1 as 10.10.0.1).
  const v4 = family === 'ipv6' ? embeddedIpv4(address) : null;
  return v4 !== null && classifyAddress(v4) === cls && policy.allowedNetworks.check(v4, 'ipv4') ? null : cls;
}

/**
 * A DNS lookup for the connection that drops the addresses the policy refuses; when none is left it
 * fails with DestinationBlockedError instead of connecting.
 */
export function guardedLookup(policy: DestinationRules): LookupFunction {
  return ((hostname: string, options: object, callback: (err: Error | null, address: string | LookupAddress[], family?: number) => void) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as LookupAddress[];
      const allowed = list.filter((a) => refusal(policy, hostname, a.address) === null);
      if (allowed.length === 0) return callback(new DestinationBlockedError(refusal(policy, hostname, list[0]!.address)!), '', 0);
      if ((options as { all?: boolean }).all) return callback(null, allowed);
      callback(null, allowed[0]!.address, allowed[0]!.family);
    });
  }) as LookupFunction;
}

export function normalizeHost(host: string): string {
  return host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
}

/**
 * What a failed delivery records: a class, never the socket's own text, which would tell a
 * requester which ports of which hosts are open (the callback error as a port scanner).
 */
export function deliveryErrorClass(err: unknown): string {
  const e = err as Error & { code?: string; cause?: Error & { code?: string } };
  const code = e?.code ?? e?.cause?.code;
  if (e instanceof DestinationBlockedError || e?.cause instanceof DestinationBlockedError) {
    return `destination_blocked (${(e instanceof DestinationBlockedError ? e : (e.cause as DestinationBlockedError)).addressClass})`;
  }
  if (e?.name === 'TimeoutError' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return 'timeout';
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection_refused';
    case 'ECONNRESET':
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
      return 'connection_reset';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_FAIL':
    case 'EAI_NODATA':
      return 'dns_failed';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'unreachable';
    default:
      if (typeof code === 'string' && (code.startsWith('ERR_TLS') || code.includes('CERT') || code.startsWith('ERR_SSL'))) return 'tls_failed';
      return 'network_error';
  }
}
