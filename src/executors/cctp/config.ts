import { z } from 'zod';
import { ADDRESS } from '../../config-schemas.ts';

/**
 * The CCTP lane's configuration (docs/cctp-lane.md): the `cctp` section of the configuration file
 * (Circle's attestation service) and, per EVM chain, `evm.chains[].cctp` (the chain's domain and
 * contracts; part of the EVM lane's chain entry, which this lane builds on).
 */

/** A chain's CCTP v2 deployment: its domain id and the TokenMessengerV2 / MessageTransmitterV2 addresses. */
export const CctpChainSchema = z
  .object({
    domain: z.number().int().nonnegative().max(0xffffffff),
    token_messenger: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address'),
    message_transmitter: z.string().regex(ADDRESS, 'a 0x-prefixed 20-byte address'),
  })
  .strict();

/** Circle's attestation service (Iris v2) the attestation observer asks. */
export const CctpSchema = z
  .object({
    attestation_url: z.string().url(),
    /** Seconds until the observer asks again about a message not yet attested. */
    poll_seconds: z.number().positive().default(5),
    /** Timeout of one request to the attestation service, in milliseconds. */
    timeout_ms: z.number().int().positive().default(10_000),
  })
  .strict();

/** The `cctp` section: optional (no attestation service configured, no attestation observer). */
export const CctpSectionSchema = CctpSchema.optional();
