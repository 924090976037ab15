import { isAddress, zeroAddress, type Address } from 'viem';
import type { EvmChains } from '../evm/chains.ts';
import type { EvmWallet } from '../evm/router.ts';
import { failed } from '../evm/tx-lifecycle.ts';
import type { ExecutionResult } from '../protocol.ts';
import { bindingExtras, bindingKey } from '../registry.ts';
import { CCTP_MINT_KEY, cctpOf } from './common.ts';

interface PlanNode {
  node_key: string;
  executor_binding: unknown;
  signer_binding: unknown;
  config?: Record<string, unknown>;
  successors?: string[];
}

/**
 * The burn's caller alignment, checked against the approved plan before the burn's preflight (as
 * the reference dispatcher's validate_cctp_burn_caller_alignment): funds burned for a mint that
 * can never be received are stuck until an operator relays them by hand. For every
 * `exec.cctp.mint` node downstream of the burn:
 * - its chain must be configured with a CCTP domain, and that domain must be the burn's
 *   destination domain (CCTP_DESTINATION_DOMAIN_MISMATCH);
 * - when the burn names a `destination_caller`, it must be the address of the mint's signer, the
 *   only account whose receiveMessage the destination will accept (CCTP_BURN_CALLER_MISALIGNED).
 * A `destination_caller` that is a `$ref` is refused: the approval must fix who may receive.
 * Without a mint node the burn is left to an external relayer and only the value's form is checked.
 * Pure. null: aligned.
 */
export function checkBurnCallerAlignment(input: {
  plan: unknown;
  nodeKey: string;
  destinationDomain: number;
  wallets: ReadonlyMap<string, EvmWallet>;
  chains: EvmChains;
}): ExecutionResult | null {
  const nodes = planNodes(input.plan);
  const burn = nodes.get(input.nodeKey);
  if (!burn) return failed('CCTP_BURN_CALLER_MISALIGNED', `node ${input.nodeKey} is not in the approved plan`);
  const raw = burn.config?.destination_caller;
  let caller: Address | null = null;
  if (raw !== undefined && raw !== null) {
    if (typeof raw !== 'string' || !isAddress(raw, { strict: false })) {
      return failed('CCTP_BURN_CALLER_MISALIGNED', 'destination_caller must be an address fixed by the plan (not a reference to another node)');
    }
    caller = raw.toLowerCase() === zeroAddress ? null : (raw.toLowerCase() as Address);
  }
  for (const mint of downstream(nodes, burn).filter((n) => bindingKey(n.executor_binding, 'executor_key') === CCTP_MINT_KEY)) {
    const chainId = chainIdOf(mint);
    const chain = chainId === null ? (input.chains.size === 1 ? input.chains.all()[0] : undefined) : input.chains.get(chainId);
    const cctp = chain ? cctpOf(chain) : null;
    if (!cctp?.ok) return failed('CCTP_DESTINATION_DOMAIN_MISMATCH', `mint node ${mint.node_key} runs on no chain with a CCTP domain`);
    if (cctp.value.domain !== input.destinationDomain) {
      return failed('CCTP_DESTINATION_DOMAIN_MISMATCH', `the burn goes to domain ${input.destinationDomain}, mint node ${mint.node_key} runs on domain ${cctp.value.domain}`);
    }
    if (caller === null) continue;
    const signerKey = bindingKey(mint.signer_binding, 'signer_key');
    const wallet = signerKey ? input.wallets.get(signerKey) : undefined;
    if (!wallet) return failed('CCTP_BURN_CALLER_MISALIGNED', `the burn names destination_caller ${caller}, mint node ${mint.node_key} has no configured signer`);
    if (wallet.address.toLowerCase() !== caller) {
      return failed(
        'CCTP_BURN_CALLER_MISALIGNED',
        `the burn names destination_caller ${caller}, mint node ${mint.node_key} sends from ${wallet.address.toLowerCase()} (signer ${signerKey}): its receiveMessage would be refused`,
      );
    }
  }
  return null;
}

function planNodes(plan: unknown): Map<string, PlanNode> {
  const nodes = plan !== null && typeof plan === 'object' ? (plan as { nodes?: unknown }).nodes : undefined;
  const out = new Map<string, PlanNode>();
  if (Array.isArray(nodes)) for (const n of nodes as PlanNode[]) if (n && typeof n.node_key === 'string') out.set(n.node_key, n);
  return out;
}

function downstream(nodes: Map<string, PlanNode>, from: PlanNode): PlanNode[] {
  const seen = new Set<string>();
  const queue = [...(from.successors ?? [])];
  while (queue.length > 0) {
    const key = queue.shift()!;
    if (seen.has(key)) continue;
    seen.add(key);
    queue.push(...(nodes.get(key)?.successors ?? []));
  }
  return [...seen].map((k) => nodes.get(k)).filter((n): n is PlanNode => n !== undefined);
}

function chainIdOf(node: PlanNode): number | null {
  for (const raw of [node.config?.chain_id, bindingExtras(node.executor_binding).chain_id, bindingExtras(node.signer_binding).chain_id]) {
    if (raw === undefined || raw === null) continue;
    const id = Number(raw);
    if (Number.isSafeInteger(id) && id > 0) return id;
  }
  return null;
}
