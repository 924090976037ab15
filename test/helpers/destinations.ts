import { after } from 'node:test';
import { destinationPolicy, type DestinationPolicy } from '../../src/callbacks/destinations.ts';

/** Tests' callback receivers listen on loopback, which deliveries refuse unless allowed like this. */
export const LOOPBACK_NETWORKS = '127.0.0.0/8,::1/128';

/** A delivery policy that lets callbacks reach loopback receivers; its client closes after the file. */
export function loopbackDestinations(): DestinationPolicy {
  const policy = destinationPolicy({ callbackAllowedNetworks: LOOPBACK_NETWORKS.split(',') });
  after(() => policy.dispatcher.close());
  return policy;
}
