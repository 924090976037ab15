import { getAddress, type Address } from 'viem';
import type { EvmChain, EvmChains } from '../evm/chains.ts';
import type { Parsed } from '../evm/token-config.ts';

export const CCTP_LANE = 'cctp';
export const CCTP_BURN_KEY = 'exec.cctp.burn';
export const CCTP_MINT_KEY = 'exec.cctp.mint';
export const CCTP_ATTESTATION_KEY = 'exec.observe.cctp_attestation';

/** A chain's CCTP v2 deployment, from its evm.chains entry. */
export interface CctpChain {
  chain: EvmChain;
  domain: number;
  tokenMessenger: Address;
  messageTransmitter: Address;
}

/** The CCTP deployment of a configured chain, or why there is none. */
export function cctpOf(chain: EvmChain): Parsed<CctpChain> {
  const c = chain.config.cctp;
  if (!c) return { ok: false, code: 'CCTP_CHAIN_NOT_CONFIGURED', detail: `${chain.label} has no cctp entry in evm.chains` };
  return {
    ok: true,
    value: { chain, domain: c.domain, tokenMessenger: getAddress(c.token_messenger), messageTransmitter: getAddress(c.message_transmitter) },
  };
}

/** The CCTP deployment of a chain id, or why there is none. */
export function cctpOfChainId(chains: EvmChains, chainId: unknown, what: string): Parsed<CctpChain> {
  const id = typeof chainId === 'string' && /^[0-9]+$/.test(chainId) ? Number(chainId) : chainId;
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id <= 0) return { ok: false, code: 'CCTP_INVALID_CONFIG', detail: `${what} must be a chain id` };
  const chain = chains.get(id);
  if (!chain) return { ok: false, code: 'EVM_CHAIN_NOT_CONFIGURED', detail: `${what}: chain ${id} is not configured` };
  return cctpOf(chain);
}

/** The configured chain whose CCTP domain is `domain`. */
export function cctpOfDomain(chains: EvmChains, domain: number): CctpChain | null {
  for (const chain of chains.all()) {
    const c = cctpOf(chain);
    if (c.ok && c.value.domain === domain) return c.value;
  }
  return null;
}
