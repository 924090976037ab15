import { getAddress, isAddress, parseUnits, type Address } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { ConfigFile } from '../config-file.ts';
import type { WatchEntry } from '../persistence/balances.ts';
import type { BalanceChain } from './clients.ts';

/**
 * What the balance snapshots watch, derived from the configuration: every configured signer's
 * address on each chain it signs for, every `evm.watch` address, and the legacy single chain's
 * `evm_local` signer; on each, the chain's native coin and every `evm.tokens` entry of that chain.
 * The sim lane's balances come from `sim.balances`. Pure apart from deriving addresses from keys.
 */

export const NATIVE_ASSET = 'native';
export const NATIVE_DECIMALS = 18;
export const SIM_CHAIN = 'sim';
export const LEGACY_SIGNER_KEY = 'evm_local';

export const evmChainKey = (chainId: number): string => `eip155:${chainId}`;

/** The chain id of an 'eip155:<id>' key; null for other chains (the sim lane). */
export function chainIdOf(chain: string): number | null {
  const m = /^eip155:([1-9][0-9]{0,15})$/.exec(chain);
  return m ? Number(m[1]) : null;
}

export interface BalanceTarget extends WatchEntry {
  /** EVM targets: the chain to ask. */
  chainId?: number;
  /** erc20 targets: the token contract, and its decimals when the configuration gives them. */
  token?: { address: Address; decimals?: number };
  /** sim targets: the scripted answer. */
  sim?: { amountBaseUnits: bigint; decimals: number; fail: boolean };
  /** gateway targets: the API to ask and the depositor's domain (with chainId and token: the chain's USDC). */
  gateway?: { apiUrl: string; timeoutMs: number; domain: number };
}

/** What a lane adds to the watch plan from its own sections (src/executors/<lane>/lane.ts, `balanceTargets`). */
export interface BalanceTargetSource {
  balanceTargets?(file: Readonly<Record<string, unknown>>): BalanceTarget[];
}

export interface LegacyChain {
  chainId: number;
  rpcUrl: string;
  signerPrivateKey: string;
}

export interface WatchPlan {
  targets: BalanceTarget[];
  chains: Map<number, BalanceChain>;
  /** Signers whose address is not known here (a missing key variable, a KMS signer without `address`). */
  skipped: Array<{ signer: string; reason: string }>;
}

const KEY = /^0x[0-9a-fA-F]{64}$/;

/** The address of a 0x-prefixed 32-byte key; null when the value is not one (never echoed). */
export function addressOfKey(key: string | undefined): Address | null {
  if (!key || !KEY.test(key)) return null;
  try {
    return privateKeyToAccount(key as `0x${string}`).address;
  } catch {
    return null;
  }
}

export function buildWatchPlan(input: { file: ConfigFile; legacy?: LegacyChain | null; env: NodeJS.ProcessEnv; lanes?: readonly BalanceTargetSource[] }): WatchPlan {
  const { legacy, env } = input;
  // A section of a lane the lane list lacks is absent: it watches nothing (src/executors/lanes.ts).
  const file = {
    evm: input.file.evm ?? { chains: [], signers: [], watch: [], tokens: [], fee_caps: [] },
    sim: input.file.sim ?? { balances: [] },
  };
  const chains = new Map<number, BalanceChain>();
  for (const c of file.evm.chains) chains.set(c.chain_id, c);
  if (legacy && !chains.has(legacy.chainId)) chains.set(legacy.chainId, { chain_id: legacy.chainId, rpc_url: legacy.rpcUrl });

  // chain id -> lowercase address -> label; the first label seen wins (signers before watch entries).
  const wallets = new Map<number, Map<string, string | null>>();
  const add = (chainId: number, address: string, label: string | null) => {
    if (!chains.has(chainId)) return;
    const byAddress = wallets.get(chainId) ?? new Map<string, string | null>();
    wallets.set(chainId, byAddress);
    const lower = address.toLowerCase();
    if (!byAddress.has(lower)) byAddress.set(lower, label);
  };

  const skipped: WatchPlan['skipped'] = [];
  for (const s of file.evm.signers) {
    let address: string | null = null;
    if (s.kind === 'local_key') {
      address = addressOfKey(s.private_key_env ? env[s.private_key_env] : undefined);
      if (!address) skipped.push({ signer: s.key, reason: `${s.private_key_env} does not hold a key` });
    } else {
      address = s.address ?? null;
      if (!address) skipped.push({ signer: s.key, reason: 'no address configured for this KMS signer' });
    }
    if (address) for (const chainId of s.chains) add(chainId, address, s.key);
  }
  if (legacy) {
    const address = addressOfKey(legacy.signerPrivateKey);
    if (address) add(legacy.chainId, address, LEGACY_SIGNER_KEY);
  }
  for (const w of file.evm.watch) add(w.chain_id, w.address, w.label ?? null);

  const targets: BalanceTarget[] = [];
  for (const [chainId, byAddress] of wallets) {
    const chain = evmChainKey(chainId);
    const tokens = file.evm.tokens.filter((t) => t.chain_id === chainId);
    for (const [wallet, label] of byAddress) {
      targets.push({ chain, wallet, asset: NATIVE_ASSET, lane: 'evm', fetcher: 'evm_native', symbol: null, label, chainId });
      for (const t of tokens) {
        if (!isAddress(t.address, { strict: false })) continue;
        targets.push({
          chain,
          wallet,
          asset: t.address.toLowerCase(),
          lane: 'evm',
          fetcher: 'erc20',
          symbol: t.symbol,
          label,
          chainId,
          token: { address: getAddress(t.address), decimals: t.decimals },
        });
      }
    }
  }
  for (const b of file.sim.balances) {
    targets.push({
      chain: SIM_CHAIN,
      wallet: b.wallet,
      asset: b.asset,
      lane: 'sim',
      fetcher: 'sim',
      symbol: b.asset,
      label: null,
      sim: { amountBaseUnits: parseUnits(b.amount, b.decimals), decimals: b.decimals, fail: b.fail },
    });
  }
  for (const lane of input.lanes ?? []) targets.push(...(lane.balanceTargets?.(input.file) ?? []));
  return { targets: dedupe(targets), chains, skipped };
}

function dedupe(targets: BalanceTarget[]): BalanceTarget[] {
  const seen = new Set<string>();
  return targets.filter((t) => {
    const k = `${t.chain}\u0000${t.wallet}\u0000${t.asset}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
