import type { RegistryBaseline } from '../lane.ts';
import type { CcipConfig } from './config.ts';

/**
 * What the `ccip` section asserts on chain (read by ccip_drift and verify_drift, docs/ccip-lane.md
 * "Drift"). Every configured chain is a source for every other one, so per source chain:
 *
 * - its Router has code and supports each other chain's selector (isChainSupported: a lane taken
 *   down, the OnRamp set to zero, answers false);
 * - its OffRamp (when configured) has code;
 * - per token with a configured pool: the TokenAdminRegistry (when configured) answers that pool for
 *   the token (getPool: a re-pointed pool is the one the Router pays into), and the pool is the
 *   token's (getToken) and supports each other chain (isSupportedChain).
 *
 * Declared from the file alone (no I/O). Addresses and answers in lowercase hex.
 */
export function ccipRegistryBaselines(file: Readonly<Record<string, unknown>>): RegistryBaseline[] {
  const c = file.ccip as CcipConfig | undefined;
  if (!c) return [];
  const tokens = ((file.evm as { tokens?: Array<{ chain_id: number; symbol: string; address: string }> } | undefined)?.tokens ?? []);
  const out: RegistryBaseline[] = [];
  for (const ch of c.chains) {
    const at = `ccip.chains[${ch.chain_id}]`;
    const others = c.chains.filter((o) => o.chain_id !== ch.chain_id);
    const router = ch.router.toLowerCase();
    out.push({ chainId: ch.chain_id, subject: `${at}.router`, address: router, property: 'code', expected: 'code' });
    for (const o of others) {
      out.push({
        chainId: ch.chain_id,
        subject: `${at}.router`,
        address: router,
        property: { name: `isChainSupported(${o.selector})`, signature: 'function isChainSupported(uint64) view returns (bool)', args: [BigInt(o.selector)] },
        expected: 'true',
      });
    }
    if (ch.off_ramp) out.push({ chainId: ch.chain_id, subject: `${at}.off_ramp`, address: ch.off_ramp.toLowerCase(), property: 'code', expected: 'code' });
    for (const [symbol, poolAddress] of Object.entries(ch.token_pools ?? {})) {
      const token = tokens.find((t) => t.chain_id === ch.chain_id && t.symbol === symbol);
      if (!token) continue; // refused by the section's checks (refineCcip)
      const pool = poolAddress.toLowerCase();
      if (ch.token_admin_registry) {
        out.push({
          chainId: ch.chain_id,
          subject: `${at}.token_admin_registry`,
          address: ch.token_admin_registry.toLowerCase(),
          property: { name: `getPool(${symbol})`, signature: 'function getPool(address) view returns (address)', args: [token.address] },
          expected: pool,
        });
      }
      const subject = `${at}.token_pools[${symbol}]`;
      out.push({ chainId: ch.chain_id, subject, address: pool, property: { name: 'getToken()', signature: 'function getToken() view returns (address)' }, expected: token.address.toLowerCase() });
      for (const o of others) {
        out.push({
          chainId: ch.chain_id,
          subject,
          address: pool,
          property: { name: `isSupportedChain(${o.selector})`, signature: 'function isSupportedChain(uint64) view returns (bool)', args: [BigInt(o.selector)] },
          expected: 'true',
        });
      }
    }
  }
  return out;
}
