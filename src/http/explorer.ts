/**
 * Links to a block explorer for a node's transaction: FERRY_EXPLORER_URLS maps a chain (its id, or a
 * network name as an exchange names it) to a URL template holding `{tx}`. Ferry never fetches these
 * URLs; the UI only renders them as links. Pure.
 */

import { EXPLORER_KEY } from '../config.ts';

/** Chain id or network name -> URL template with `{tx}` (FERRY_EXPLORER_URLS, validated in src/config.ts). */
export type ExplorerUrls = Readonly<Record<string, string>>;
const TX_HASH = /^(0x)?[0-9a-fA-F]{64}$/;

export interface NodeTransactionView {
  /** The chain transaction's hash, as the provider reported it. */
  hash: string;
  /** The chain it is on (an id, or the exchange's network name), when known. */
  chain: string | null;
  /** The explorer's page for it, when FERRY_EXPLORER_URLS has a template for the chain. */
  explorer_url: string | null;
}

interface NodeFacts {
  provider_refs?: Record<string, unknown> | null;
  config?: Record<string, unknown> | null;
  expected_effect?: unknown;
}

/** The node's chain transaction (provider_refs.tx_hash), with its explorer link; null when it has none. */
export function nodeTransaction(n: NodeFacts, intent: Record<string, unknown>, urls: ExplorerUrls): NodeTransactionView | null {
  const refs = n.provider_refs ?? {};
  const hash = typeof refs.tx_hash === 'string' && TX_HASH.test(refs.tx_hash) ? refs.tx_hash : null;
  if (!hash) return null;
  const pinned = (n.expected_effect as { effect?: { chain_id?: unknown } } | null | undefined)?.effect?.chain_id;
  const candidates = [refs.chain_id, pinned, n.config?.chain_id, n.config?.network, intent.network, intent.chain_id]
    .filter((c) => (typeof c === 'number' && Number.isSafeInteger(c)) || (typeof c === 'string' && EXPLORER_KEY.test(c)))
    .map(String);
  const chain = candidates[0] ?? null;
  const key = candidates.find((c) => urls[c] !== undefined);
  // The hash is checked above (hex only), so it cannot change the URL's shape; encoded all the same.
  const explorer_url = key ? urls[key]!.split('{tx}').join(encodeURIComponent(hash)) : null;
  return { hash, chain: key ?? chain, explorer_url };
}
