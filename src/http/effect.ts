import { decodeFunctionData, isHex, sliceHex, type Hex } from 'viem';
import { tokenMessengerAbi } from '../executors/cctp/message.ts';
import type { ConfigFile } from '../config-file.ts';
import {
  CCTP_BURN_EXECUTOR,
  CCTP_MINT_EXECUTOR,
  ERC20_TRANSFER_EXECUTOR,
  NATIVE_TRANSFER_EXECUTOR,
  deriveExpectedEffect,
} from '../executors/evm/expected-effect.ts';
import { executorKeyOf, signerKeyOf } from '../plan/bindings.ts';

/**
 * The effect of a movement: what its approval lets each node do, in the words an approver reads
 * (action, asset, amount as a decimal with the asset's decimals, source, destination, chain or
 * venue, fee cap), with the treasury policy's decision beside it. One derivation, served by
 * GET /v3/movements/{id} and /inspect/movements/{id}, printed by `ferry movements show|approve` and
 * drawn by /ui, so the three never disagree.
 *
 * Derived from the approved compiled plan and the intent, and for a signing node from the expected
 * effect pinned when the movement was created (request_nodes.expected_effect): that is what the
 * signer will compare the transaction with, so that is what is shown. Never from what an executor
 * prepared, and never from the configuration of now (but for display facts: chain names and which
 * exchange an account is on). Pure.
 */

export const EFFECT_KINDS = [
  'transfer',
  'token_approval',
  'contract_call',
  'cctp_burn',
  'cctp_mint',
  'cex_withdrawal',
  'observation',
  'gate',
  'action',
] as const;
export type EffectKind = (typeof EFFECT_KINDS)[number];

/** Where a node's facts come from: the pinned expected effect, the plan and intent, or nothing (the signer refuses it). */
export type EffectBasis = 'pinned' | 'plan' | 'unavailable';

export interface FeeCapView {
  /** The most wei per gas the signer may offer (EIP-1559 maxFeePerGas), and the same in gwei. */
  max_fee_per_gas_wei: string | null;
  max_fee_per_gas_gwei: string | null;
  /** The CCTP burn's max fee, a decimal of the burned token. */
  cctp_max_fee: string | null;
}

export interface NodeEffectView {
  node_key: string;
  action: string;
  kind: EffectKind;
  executor_key: string | null;
  lane: string | null;
  /** Whether the node can move funds (observations and gates cannot). */
  moves_funds: boolean;
  basis: EffectBasis;
  /** Why the node has no approval-bound effect (basis unavailable): its signer will refuse to sign. */
  unavailable: string | null;
  /** The symbol (USDC), `native` for the chain's coin, or an exchange coin code. */
  asset: string | null;
  /** The token contract, for a token on an EVM chain. */
  asset_address: string | null;
  /** A decimal string in the asset's units ("100.25"), exactly what is approved. */
  amount: string | null;
  amount_base_units: string | null;
  decimals: number | null;
  /** The signer key (and its address when known), or the exchange account. */
  source: string | null;
  source_address: string | null;
  destination: string | null;
  destination_tag: string | null;
  chain_id: number | null;
  /** The chain's name in evm.chains, else `chain <id>`; the exchange account's network for a withdrawal. */
  chain: string | null;
  /** The exchange and account of a CEX node (`binance:binance_main`). */
  venue: string | null;
  /** For a burn: where it mints. */
  destination_chain_id: number | null;
  destination_domain: number | null;
  /** The contract a call goes to, when it is not the destination (a token, a messenger) and its method. */
  contract: string | null;
  method: string | null;
  fee_cap: FeeCapView | null;
}

export interface MovementEffectView {
  compiled_plan_hash: string;
  policy: EffectPolicy | null;
  nodes: NodeEffectView[];
  /** What the approver should know and the effect does not settle (checks that only run at dispatch). */
  warnings: string[];
}

export interface EffectPolicy {
  rule_set_version: number | null;
  rule_id: string | null;
  action: string;
  destination_entry: string | null;
  approvers_from: string[] | null;
}

/** Display facts from the configuration: names, never amounts or recipients. */
export interface EffectFacts {
  chainNames?: ReadonlyMap<number, string>;
  /** CEX account key -> exchange. */
  accountExchanges?: ReadonlyMap<string, string>;
  /** Signer key -> the address its health check observed. */
  signerAddresses?: ReadonlyMap<string, string>;
  /**
   * The configuration of now, for a signing node created before effects were pinned: dispatch signs
   * it against the effect derived from the configuration of now, so that is what is shown (basis plan).
   */
  evm?: ConfigFile['evm'];
  fallbackFeeCapWei?: string;
}

export interface EffectInput {
  /** movement_requests.compiled_plan, as approved. */
  plan: unknown;
  intent: Record<string, unknown>;
  compiledPlanHash: string;
  /** The movement's node rows (their pinned expected effects). */
  nodes: ReadonlyArray<{ node_key: string; expected_effect?: unknown }>;
  policy: EffectPolicy | null;
  facts?: EffectFacts;
}

interface PlanNode {
  node_key: string;
  node_kind?: string;
  action_type?: string;
  executor_binding?: unknown;
  signer_binding?: unknown;
  config?: Record<string, unknown>;
}

interface Pinned {
  chain_id: number;
  asset: string;
  to: string;
  amount_base_units: string;
  max_fee_per_gas_cap_wei?: string;
  token_method?: 'transfer' | 'approve';
  token_decimals?: number;
  token_symbol?: string;
  call?: { method: string; selector: string; data?: string };
  /** A LayerZero OFT send (ExpectedEffect.oft_send): what is read of it for display. */
  oft_send?: { dst_eid: number; to: string; amount_ld: string };
  /** A Chainlink CCIP send (ExpectedEffect.ccip_send): what is read of it for display. */
  ccip_send?: { destination_chain_id: number; receiver: string; amount: string };
  /** A Circle Gateway burn intent (ExpectedEffect.gateway_burn): what is read of it for display. */
  gateway_burn?: { destination_chain_id: number; destination_recipient: string; value: string };
}

const NATIVE_DECIMALS = 18;
const BALANCE_WARNING = 'balances and the provider\'s limits are checked when a node runs, not at approval: approving does not mean the wallet or account holds the amount';

export function movementEffect(input: EffectInput): MovementEffectView {
  const planNodes = nodesOf(input.plan);
  const pinned = new Map(input.nodes.map((n) => [n.node_key, n.expected_effect]));
  const nodes = planNodes.map((n) => nodeEffect(n, input, pinned.get(n.node_key)));
  const warnings: string[] = [];
  for (const n of nodes) {
    if (n.basis === 'unavailable') warnings.push(`node ${n.node_key} has no approval-bound effect, its signer will refuse it: ${n.unavailable}`);
  }
  if (nodes.some((n) => n.moves_funds)) warnings.push(BALANCE_WARNING);
  return { compiled_plan_hash: input.compiledPlanHash, policy: input.policy, nodes, warnings };
}

function nodesOf(plan: unknown): PlanNode[] {
  const nodes = plan !== null && typeof plan === 'object' ? (plan as { nodes?: unknown }).nodes : undefined;
  if (!Array.isArray(nodes)) return [];
  return nodes.filter((n): n is PlanNode => n !== null && typeof n === 'object' && typeof (n as PlanNode).node_key === 'string');
}

function blank(n: PlanNode, kind: EffectKind, executorKey: string | null): NodeEffectView {
  return {
    node_key: n.node_key,
    action: n.action_type ?? '',
    kind,
    executor_key: executorKey,
    lane: laneOf(executorKey),
    moves_funds: kind !== 'observation' && kind !== 'gate',
    basis: 'plan',
    unavailable: null,
    asset: null,
    asset_address: null,
    amount: null,
    amount_base_units: null,
    decimals: null,
    source: null,
    source_address: null,
    destination: null,
    destination_tag: null,
    chain_id: null,
    chain: null,
    venue: null,
    destination_chain_id: null,
    destination_domain: null,
    contract: null,
    method: null,
    fee_cap: null,
  };
}

function laneOf(executorKey: string | null): string | null {
  const m = executorKey ? /^exec\.([a-z0-9_]+)\./.exec(executorKey) : null;
  return m ? m[1]! : null;
}

function nodeEffect(n: PlanNode, input: EffectInput, pinnedRaw: unknown): NodeEffectView {
  const { intent } = input;
  const facts = input.facts ?? {};
  const config = n.config ?? {};
  const executorKey = executorKeyOf(n.executor_binding);
  const signerKey = signerKeyOf(n.signer_binding);
  if (n.node_kind === 'observe') return blank(n, 'observation', executorKey);
  if (n.node_kind === 'manual_gate' || (n.action_type ?? '').startsWith('manual_')) return blank(n, 'gate', executorKey);

  if (signerKey !== null) {
    let pinned = pinnedRaw;
    let basis: EffectBasis = 'pinned';
    if ((pinnedRaw === null || pinnedRaw === undefined) && facts.evm) {
      // Created before pinning: what dispatch would sign it against, derived from the configuration of now.
      const derived = deriveExpectedEffect({ plan: input.plan, nodeKey: n.node_key, intent, evm: facts.evm, fallbackFeeCapWei: facts.fallbackFeeCapWei });
      pinned = derived.ok ? { effect: derived.effect } : { unavailable: derived.reason };
      basis = 'plan';
    }
    const v = signingEffect(n, executorKey, signerKey, config, intent, pinned, facts);
    if (v.basis === 'pinned') v.basis = basis;
    return v;
  }

  if (executorKey === 'exec.cex.withdrawal_action') {
    const v = blank(n, 'cex_withdrawal', executorKey);
    const account = text(bindingField(n.executor_binding, 'account')) ?? text(config.account);
    const exchange = account ? facts.accountExchanges?.get(account) : undefined;
    v.asset = text(config.coin) ?? text(config.asset) ?? text(intent.asset);
    v.amount = text(config.amount) ?? text(intent.amount);
    const dest = destinationOf(intent);
    v.destination = text(config.address) ?? dest.address;
    v.destination_tag = text(config.address_tag) ?? dest.tag;
    v.source = account ? `account ${account}` : null;
    v.venue = account ? (exchange ? `${exchange}:${account}` : account) : null;
    v.chain = text(config.network) ?? text(intent.network);
    return v;
  }

  // Any other action (the simulation lane, an executor without a lane of its own): what the plan
  // and the intent name, as the executors read them.
  const v = blank(n, 'action', executorKey);
  v.asset = text(config.asset) ?? text(config.token) ?? text(config.coin) ?? text(intent.asset);
  v.amount = text(config.amount) ?? text(intent.amount);
  const dest = destinationOf(intent);
  v.destination = text(config.to) ?? text(config.address) ?? text(config.destination) ?? dest.address;
  v.destination_tag = dest.tag;
  const chainId = integer(config.chain_id) ?? integer(intent.chain_id);
  if (chainId !== null) {
    v.chain_id = chainId;
    v.chain = chainName(chainId, facts);
  } else {
    v.chain = text(config.network) ?? text(intent.network) ?? text(intent.chain) ?? null;
  }
  return v;
}

function signingEffect(
  n: PlanNode,
  executorKey: string | null,
  signerKey: string,
  config: Record<string, unknown>,
  intent: Record<string, unknown>,
  pinnedRaw: unknown,
  facts: EffectFacts,
): NodeEffectView {
  const kind: EffectKind =
    executorKey === CCTP_BURN_EXECUTOR
      ? 'cctp_burn'
      : executorKey === CCTP_MINT_EXECUTOR
        ? 'cctp_mint'
        : config.token_approval !== undefined
          ? 'token_approval'
          : config.contract_call !== undefined
            ? 'contract_call'
            : executorKey === ERC20_TRANSFER_EXECUTOR || executorKey === NATIVE_TRANSFER_EXECUTOR
              ? 'transfer'
              : 'action';
  const v = blank(n, kind, executorKey);
  v.source = `signer ${signerKey}`;
  v.source_address = facts.signerAddresses?.get(signerKey) ?? null;
  const pin = pinnedOf(pinnedRaw);
  if (!pin.effect) {
    v.basis = 'unavailable';
    v.unavailable = pin.unavailable ?? 'no expected effect was pinned for this node when the movement was created';
    return v;
  }
  const e = pin.effect;
  v.basis = 'pinned';
  v.chain_id = e.chain_id;
  v.chain = chainName(e.chain_id, facts);
  const gwei = e.max_fee_per_gas_cap_wei === undefined ? null : decimalOf(e.max_fee_per_gas_cap_wei, 9);
  v.fee_cap = { max_fee_per_gas_wei: e.max_fee_per_gas_cap_wei ?? null, max_fee_per_gas_gwei: gwei, cctp_max_fee: null };
  const tokenAsset = () => {
    v.asset = e.token_symbol ?? e.asset;
    v.asset_address = e.asset === 'native' ? null : e.asset;
  };

  if (kind === 'cctp_burn') {
    const burn = decodeBurn(e.call?.data);
    v.decimals = e.token_decimals ?? null;
    v.contract = e.to;
    v.method = e.call?.method ?? null;
    if (burn) {
      v.asset = e.token_symbol ?? burn.token;
      v.asset_address = burn.token;
      v.amount_base_units = burn.amount.toString();
      v.amount = v.decimals === null ? null : decimalOf(v.amount_base_units, v.decimals);
      v.destination = burn.recipient;
      v.destination_domain = burn.domain;
      v.destination_chain_id = integer(config.destination_chain_id);
      if (v.fee_cap) v.fee_cap.cctp_max_fee = v.decimals === null ? burn.maxFee.toString() : decimalOf(burn.maxFee.toString(), v.decimals);
    }
    return v;
  }
  if (kind === 'cctp_mint') {
    v.asset = 'native';
    v.amount_base_units = e.amount_base_units;
    v.decimals = NATIVE_DECIMALS;
    v.amount = decimalOf(e.amount_base_units, NATIVE_DECIMALS);
    v.contract = e.to;
    v.method = e.call?.method ?? null;
    v.destination = text(config.mint_recipient) ?? destinationOf(intent).address;
    return v;
  }
  if (e.oft_send) {
    // A LayerZero OFT send (the USDT0 lane): the token and amount it moves, to the recipient on the destination chain.
    tokenAsset();
    v.decimals = e.token_decimals ?? null;
    v.amount_base_units = e.oft_send.amount_ld;
    v.amount = v.decimals === null ? null : decimalOf(e.oft_send.amount_ld, v.decimals);
    v.destination = `0x${e.oft_send.to.slice(26)}`;
    v.destination_chain_id = integer(config.destination_chain_id);
    v.contract = e.to;
    v.method = e.call?.method ?? null;
    return v;
  }
  if (e.ccip_send) {
    // A Chainlink CCIP send (the CCIP lane): the token and amount it moves, to the receiver on the destination chain, not the fee value.
    tokenAsset();
    v.decimals = e.token_decimals ?? null;
    v.amount_base_units = e.ccip_send.amount;
    v.amount = v.decimals === null ? null : decimalOf(e.ccip_send.amount, v.decimals);
    v.destination = `0x${e.ccip_send.receiver.slice(26)}`;
    v.destination_chain_id = e.ccip_send.destination_chain_id;
    v.contract = e.to;
    v.method = e.call?.method ?? null;
    return v;
  }
  if (e.gateway_burn) {
    // A Circle Gateway burn intent (the Gateway lane): the value it sends to the recipient on the destination chain, signed as typed data.
    tokenAsset();
    v.decimals = e.token_decimals ?? null;
    v.amount_base_units = e.gateway_burn.value;
    v.amount = v.decimals === null ? null : decimalOf(e.gateway_burn.value, v.decimals);
    v.destination = e.gateway_burn.destination_recipient;
    v.destination_chain_id = e.gateway_burn.destination_chain_id;
    v.contract = e.to;
    v.method = 'BurnIntent (EIP-712)';
    return v;
  }
  if (e.token_method !== undefined) {
    // An ERC-20 transfer or allowance: the token is the contract called, the recipient or spender the destination.
    tokenAsset();
    v.decimals = e.token_decimals ?? null;
    v.amount_base_units = e.amount_base_units;
    v.amount = v.decimals === null ? null : decimalOf(e.amount_base_units, v.decimals);
    v.destination = e.to;
    v.contract = e.asset;
    v.method = e.token_method === 'approve' ? 'approve(address,uint256)' : 'transfer(address,uint256)';
    return v;
  }
  // The chain's coin: a native transfer, or the value sent with a contract call.
  v.asset = 'native';
  v.decimals = NATIVE_DECIMALS;
  v.amount_base_units = e.amount_base_units;
  v.amount = decimalOf(e.amount_base_units, NATIVE_DECIMALS);
  v.destination = e.to;
  if (e.call) {
    v.contract = e.to;
    v.method = e.call.method;
  }
  return v;
}

function pinnedOf(raw: unknown): { effect?: Pinned; unavailable?: string } {
  if (raw === null || typeof raw !== 'object') return {};
  const r = raw as { effect?: unknown; unavailable?: unknown };
  if (typeof r.unavailable === 'string') return { unavailable: r.unavailable };
  const e = r.effect as Pinned | undefined;
  if (e && typeof e === 'object' && typeof e.chain_id === 'number' && typeof e.to === 'string' && typeof e.amount_base_units === 'string') return { effect: e };
  return {};
}

function decodeBurn(data: string | undefined): { amount: bigint; domain: number; recipient: string; token: string; maxFee: bigint } | null {
  if (!data || !isHex(data)) return null;
  try {
    const { functionName, args } = decodeFunctionData({ abi: tokenMessengerAbi, data: data as Hex });
    if (functionName !== 'depositForBurn') return null;
    const [amount, domain, recipientWord, token, , maxFee] = args as readonly [bigint, number, Hex, string, Hex, bigint, number];
    return { amount, domain, recipient: sliceHex(recipientWord, 12).toLowerCase(), token: token.toLowerCase(), maxFee };
  } catch {
    return null;
  }
}

function chainName(id: number, facts: EffectFacts): string {
  const name = facts.chainNames?.get(id);
  return name ? `${name} (${id})` : `chain ${id}`;
}

function bindingField(binding: unknown, field: string): unknown {
  return binding !== null && typeof binding === 'object' && !Array.isArray(binding) ? (binding as Record<string, unknown>)[field] : undefined;
}

function text(v: unknown): string | null {
  if (typeof v === 'string') return v.length > 0 ? v : null;
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return null;
}

function integer(v: unknown): number | null {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return v;
  if (typeof v === 'string' && /^[0-9]{1,15}$/.test(v)) return Number(v);
  return null;
}

/** The intent's destination as the executors read it: a string, or { address, tag }. */
function destinationOf(intent: Record<string, unknown>): { address: string | null; tag: string | null } {
  const d = intent.destination;
  if (typeof d === 'string') return { address: d, tag: null };
  if (d !== null && typeof d === 'object' && !Array.isArray(d)) {
    const o = d as Record<string, unknown>;
    return { address: text(o.address), tag: text(o.tag) ?? text(o.memo) };
  }
  return { address: null, tag: null };
}

/** Base units as a decimal of `decimals` places, trailing zeros dropped ("100250000", 6 -> "100.25"). Exact. */
export function decimalOf(baseUnits: string, decimals: number): string {
  if (!/^[0-9]+$/.test(baseUnits)) return baseUnits;
  const digits = BigInt(baseUnits).toString().padStart(decimals + 1, '0');
  const whole = digits.slice(0, digits.length - decimals);
  const fraction = digits.slice(digits.length - decimals).replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : whole;
}
