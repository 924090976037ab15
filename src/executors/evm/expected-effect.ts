import { getAddress, isAddress, toFunctionSelector, zeroAddress } from 'viem';
import { feeCapOf, type ConfigFile } from '../../config-file.ts';
import { maxFeeOf } from '../cctp/fees.ts';
import { DEPOSIT_FOR_BURN_SIGNATURE, encodeDepositForBurn, RECEIVE_MESSAGE_SIGNATURE } from '../cctp/message.ts';
import { bindingExtras, bindingKey } from '../registry.ts';
import { DEFAULT_PERMIT_DEADLINE_SECONDS, MAX_TYPED_DATA_DEADLINE_SECONDS, PERMIT_PRIMARY_TYPE } from '../signers/typed-data-policy.ts';
import type { ExpectedEffect } from '../protocol.ts';
import type { HyperliquidConfig } from '../hyperliquid/config.ts';
import type { Usdt0Config } from '../usdt0/config.ts';
import type { CcipConfig } from '../ccip/config.ts';
import type { GatewayConfig } from '../gateway/config.ts';
import { GATEWAY_SIGNING_KEYS, gatewayEffect } from '../gateway/effect.ts';
import { CCIP_SEND_SELECTOR, CCIP_SEND_SIGNATURE, encodeExtraArgsV2 as encodeExtraArgs, encodeReceiver, MAX_UINT64 } from '../ccip/router.ts';
import { addressToBytes32, DEFAULT_SHARED_DECIMALS, SEND_SELECTOR, SEND_SIGNATURE } from '../usdt0/oft.ts';

/**
 * The expected effect of a signing node: what the APPROVED plan lets its transaction do (chain,
 * asset, recipient, amount, fee cap), derived from the compiled plan's node (config and bindings),
 * the movement's intent and Ferry's configuration (evm.chains fee caps, evm.tokens decimals). It is
 * never derived from what the executor prepared: the signer compares the executor's transaction
 * with it, so a buggy or hostile executor cannot make the key sign anything else.
 *
 * Pure. A node whose effect cannot be derived (an executor without an approval-bound effect, a
 * value that only a predecessor's output would give, unknown decimals...) gets a reason instead,
 * and an EVM signer refuses it (default deny).
 */

export const NATIVE_TRANSFER_EXECUTOR = 'exec.evm.native_transfer';
export const ERC20_TRANSFER_EXECUTOR = 'exec.evm.erc20_transfer';
export const CCTP_BURN_EXECUTOR = 'exec.cctp.burn';
export const CCTP_MINT_EXECUTOR = 'exec.cctp.mint';
export const HYPERLIQUID_TOPUP_EXECUTOR = 'exec.hyperliquid.topup';
export const USDT0_SEND_EXECUTOR = 'exec.usdt0.send';
export const CCIP_SEND_EXECUTOR = 'exec.ccip.send';
/** config.token_permit.spender naming the chain's CCTP TokenMessengerV2 (evm.chains[].cctp.token_messenger). */
export const CCTP_TOKEN_MESSENGER_SPENDER = 'cctp.token_messenger';
/** config.token_approval.spender naming the chain's CCIP Router (ccip.chains[].router): a send's fee token allowance. */
export const CCIP_ROUTER_SPENDER = 'ccip.router';

export type ExpectedEffectResult = { ok: true; effect: ExpectedEffect } | { ok: false; reason: string };

export interface ExpectedEffectInput {
  /** The request's compiled plan (`requests.compiled_plan`), as approved. */
  plan: unknown;
  nodeKey: string;
  intent: Record<string, unknown>;
  /** Ferry's `config.file.evm`. */
  evm: ConfigFile['evm'];
  /**
   * FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI: the cap of a chain the file lists neither in evm.chains nor
   * in evm.fee_caps (the single chain of FERRY_EVM_RPC_URL).
   */
  fallbackFeeCapWei?: string;
  /** Ferry's `config.file.hyperliquid` (the Hyperliquid lane's bridge and token), when configured. */
  hyperliquid?: HyperliquidConfig | null;
  /** Ferry's `config.file.usdt0` (the USDT0 lane's OFT deployments), when configured. */
  usdt0?: Usdt0Config | null;
  /** Ferry's `config.file.ccip` (the CCIP lane's chains, Routers and tokens), when configured. */
  ccip?: CcipConfig | null;
  /** Ferry's `config.file.gateway` (the Gateway lane's wallets, minters and API), when configured. */
  gateway?: GatewayConfig | null;
}

interface PlanNode {
  node_key: string;
  executor_binding: unknown;
  signer_binding: unknown;
  config: Record<string, unknown>;
}

const REF_PREFIX = '$ref:';
/** transfer(address,uint256), approve(address,uint256), transferFrom(address,address,uint256). */
const ERC20_METHOD_SELECTORS = new Set(['0xa9059cbb', '0x095ea7b3', '0x23b872dd']);
/**
 * Calls that let someone else spend or move the wallet's tokens, or send them with a callback: a
 * plan can never approve them as a generic contract_call, since the signer would check only the
 * method, never the spender, the amount or what the callback does. An allowance the plan needs
 * goes through config.token_approval, whose spender and amount the signer checks.
 */
const ALLOWANCE_GRANTING_SELECTORS = new Map(
  [
    'increaseAllowance(address,uint256)',
    'permit(address,address,uint256,uint256,uint8,bytes32,bytes32)', // EIP-2612
    'permit(address,address,uint256,uint256,bool,uint8,bytes32,bytes32)', // DAI
    'transferAndCall(address,uint256,bytes)', // ERC-677, ERC-1363
    'transferAndCall(address,uint256)', // ERC-1363
    'transferFromAndCall(address,address,uint256,bytes)', // ERC-1363
    'transferFromAndCall(address,address,uint256)', // ERC-1363
    'approveAndCall(address,uint256,bytes)', // ERC-1363
    'approveAndCall(address,uint256)', // ERC-1363
    'setApprovalForAll(address,bool)', // ERC-721, ERC-1155
    'authorizeOperator(address)', // ERC-777
    'send(address,uint256,bytes)', // ERC-777
    'approve(address,address,uint160,uint48)', // Permit2
  ].map((signature) => [toFunctionSelector(signature), signature] as const),
);
const WHOLE = /^[0-9]+$/;
const DECIMAL = /^([0-9]+)(?:\.([0-9]+))?$/;

class Unavailable extends Error {}
const unavailable = (reason: string): never => {
  throw new Unavailable(reason);
};

export function deriveExpectedEffect(input: ExpectedEffectInput): ExpectedEffectResult {
  try {
    return { ok: true, effect: derive(input) };
  } catch (err) {
    if (err instanceof Unavailable) return { ok: false, reason: err.message };
    throw err;
  }
}

/**
 * A node's expected effect as pinned when its movement is created (request_nodes.expected_effect):
 * the effect, or why none could be derived. Dispatch signs against it (resolveSigningEffect).
 */
export type PinnedEffect = { effect: ExpectedEffect } | { unavailable: string };

export function pinExpectedEffect(input: ExpectedEffectInput): PinnedEffect {
  const derived = deriveExpectedEffect(input);
  return derived.ok ? { effect: derived.effect } : { unavailable: derived.reason };
}

/** The rule of a refusal because the configuration changed what a pinned effect would be. */
export const EFFECT_CHANGED_RULE = 'effect_changed_since_approval';

/**
 * What a node is signed against at dispatch. A pinned effect rules: the configuration of now only
 * lowers its fee cap (the lower of the pinned and the current cap applies; a raised cap is not
 * used). When the configuration of now derives a different effect otherwise (token decimals or
 * symbol changed, a token or chain entry gone...), the node is refused rather than signed with
 * either: the approvers saw the movement under the pinned values, and the operator changed them.
 * Without a pin (a node created before pinning), the effect is derived from the configuration of
 * now, as it always was.
 * @returns the effect, or why there is none; `changed` set when the configuration moved.
 */
export function resolveSigningEffect(
  pinned: { effect: ExpectedEffect | null; unavailable: string | null } | null,
  now: ExpectedEffectInput,
): ExpectedEffectResult & { changed?: string } {
  const current = deriveExpectedEffect(now);
  if (!pinned) return current;
  if (!pinned.effect) return { ok: false, reason: pinned.unavailable ?? 'no expected effect was pinned for this node' };
  const effect = pinned.effect;
  if (!current.ok) return { ok: false, reason: `the configuration no longer gives this node an effect (${current.reason})`, changed: current.reason };
  const { max_fee_per_gas_cap_wei: pinnedCap, ...pinnedRest } = effect;
  const { max_fee_per_gas_cap_wei: currentCap, ...currentRest } = current.effect;
  const diff = differences(pinnedRest, currentRest);
  if (diff.length > 0) {
    return { ok: false, reason: `the configuration changed ${diff.join(', ')} since the movement was approved`, changed: diff.join(', ') };
  }
  const caps = [pinnedCap, currentCap].filter((c): c is string => c !== undefined).map((c) => BigInt(c));
  const cap = caps.length === 0 ? undefined : caps.reduce((a, b) => (b < a ? b : a)).toString();
  const { max_fee_per_gas_cap_wei: _, ...rest } = effect;
  return { ok: true, effect: cap === undefined ? rest : { ...rest, max_fee_per_gas_cap_wei: cap } };
}

function differences(a: Record<string, unknown>, b: Record<string, unknown>): string[] {
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  const shown = (v: unknown) => {
    const text = JSON.stringify(v) ?? 'none';
    return text.length > 80 ? `${text.slice(0, 77)}...` : text;
  };
  return keys.filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k])).map((k) => `${k} (${shown(a[k])} -> ${shown(b[k])})`);
}

function derive({ plan, nodeKey, intent, evm, fallbackFeeCapWei, hyperliquid, usdt0, ccip, gateway }: ExpectedEffectInput): ExpectedEffect {
  const node = planNode(plan, nodeKey);
  const config = node.config ?? {};
  const executorKey = bindingKey(node.executor_binding, 'executor_key');
  // --- Hyperliquid lane (docs/hyperliquid-lane.md): its chain is the bridge's, not the node's to choose.
  if (executorKey === HYPERLIQUID_TOPUP_EXECUTOR) return hyperliquidTopupEffect(node, config, intent, evm, hyperliquid ?? null, fallbackFeeCapWei);
  const chainId = chainIdOf(node, config, evm);
  const chain = evm.chains.find((c) => c.chain_id === chainId);
  const cap = capOf(evm, chainId, fallbackFeeCapWei);
  const withCap = (e: ExpectedEffect): ExpectedEffect => (cap === undefined ? e : { ...e, max_fee_per_gas_cap_wei: cap });

  // A permit is typed data, a call or an approval a transaction: a node is one of them, never two.
  if (config.token_permit !== undefined && (config.contract_call !== undefined || config.token_approval !== undefined)) {
    unavailable('config.token_permit cannot be combined with config.contract_call or config.token_approval: a node signs one payload');
  }

  // A contract call the plan names explicitly: that method on that contract, nothing else.
  if (config.contract_call !== undefined) {
    const call = object(config.contract_call, 'config.contract_call');
    const contract = address(plain(call.contract, 'config.contract_call.contract'), 'config.contract_call.contract');
    const method = plain(call.method, 'config.contract_call.method');
    if (typeof method !== 'string' || !/^[A-Za-z_$][A-Za-z0-9_$]*\(.*\)$/.test(method.replace(/^function\s+/, ''))) {
      unavailable('config.contract_call.method must be a function signature such as "deposit(uint256,address)"');
    }
    let selector: string;
    try {
      selector = toFunctionSelector((method as string).replace(/^function\s+/, ''));
    } catch {
      return unavailable('config.contract_call.method is not a valid function signature');
    }
    if (ERC20_METHOD_SELECTORS.has(selector)) {
      unavailable('config.contract_call cannot name an ERC-20 transfer or approve (their arguments would go unchecked): use an erc20 transfer node or config.token_approval');
    }
    const granting = ALLOWANCE_GRANTING_SELECTORS.get(selector as `0x${string}`);
    if (granting) {
      unavailable(`config.contract_call cannot name ${granting}: it lets another account spend or move the wallet's tokens with arguments the signer does not check (use config.token_approval for an allowance)`);
    }
    const value = call.value_wei === undefined ? '0' : whole(plain(call.value_wei, 'config.contract_call.value_wei'), 'config.contract_call.value_wei');
    return withCap({ chain_id: chainId, asset: 'native', to: contract, amount_base_units: value, call: { method: method as string, selector } });
  }

  if (executorKey === NATIVE_TRANSFER_EXECUTOR) {
    const to = address(plain(config.to ?? destinationOf(intent), 'recipient'), 'recipient');
    const value = whole(plain(config.value_wei ?? intent.amount, 'value'), 'value (wei)');
    if (value === '0') unavailable('value must be at least 1 wei');
    return withCap({ chain_id: chainId, asset: 'native', to, amount_base_units: value });
  }

  // An ERC-20 allowance the plan names: that spender, that amount, on that token.
  if (config.token_approval !== undefined) {
    const approval = object(config.token_approval, 'config.token_approval');
    const { token, decimals, symbol } = tokenOf(plain(approval.token, 'config.token_approval.token'), approval.decimals, chainId, evm, 'config.token_approval');
    const rawSpender = plain(approval.spender, 'config.token_approval.spender');
    // The chain's CCIP Router by name: the spender of a send's fee token (ccip.chains[].router).
    const spender =
      rawSpender === CCIP_ROUTER_SPENDER
        ? address((ccip ?? unavailable('no ccip section is configured: there is no Router to approve')).chains.find((c) => c.chain_id === chainId)?.router ?? unavailable(`chain ${chainId} has no ccip entry`), 'ccip.chains[].router')
        : address(rawSpender, 'config.token_approval.spender');
    const amount = toBaseUnits(plain(approval.amount, 'config.token_approval.amount'), decimals);
    return withCap({ chain_id: chainId, asset: token, to: spender, amount_base_units: amount, token_method: 'approve', ...tokenFacts(decimals, symbol) });
  }

  // An EIP-2612 permit the plan names: typed data, not a transaction (signers/typed-data-policy.ts).
  if (config.token_permit !== undefined) return tokenPermitEffect(object(config.token_permit, 'config.token_permit'), chainId, evm);

  if (executorKey === ERC20_TRANSFER_EXECUTOR) {
    const { token, decimals, symbol } = tokenOf(plain(config.token ?? intent.asset, 'token'), plain(config.decimals, 'config.decimals'), chainId, evm, 'config');
    const to = address(plain(config.to ?? destinationOf(intent), 'recipient'), 'recipient');
    const amount = toBaseUnits(plain(config.amount ?? intent.amount, 'amount'), decimals);
    return withCap({ chain_id: chainId, asset: token, to, amount_base_units: amount, token_method: 'transfer', ...tokenFacts(decimals, symbol) });
  }

  // --- CCTP lane (docs/cctp-lane.md) ---
  if (executorKey === CCTP_BURN_EXECUTOR) return withCap(cctpBurnEffect(config, intent, chainId, evm));
  if (executorKey === CCTP_MINT_EXECUTOR) {
    const cctp = chain?.cctp ?? unavailable(`chain ${chainId} has no cctp entry in evm.chains`);
    return withCap({
      chain_id: chainId,
      asset: 'native',
      to: address(cctp.message_transmitter, 'evm.chains[].cctp.message_transmitter'),
      amount_base_units: '0',
      call: { method: RECEIVE_MESSAGE_SIGNATURE, selector: toFunctionSelector(RECEIVE_MESSAGE_SIGNATURE) },
    });
  }
  // --- end CCTP lane ---
  // --- USDT0 lane (docs/usdt0-lane.md) ---
  if (executorKey === USDT0_SEND_EXECUTOR) return withCap(usdt0SendEffect(config, intent, chainId, evm, usdt0 ?? null));
  // --- end USDT0 lane ---
  // --- CCIP lane (docs/ccip-lane.md) ---
  if (executorKey === CCIP_SEND_EXECUTOR) return withCap(ccipSendEffect(plan, node, config, intent, chainId, evm, ccip ?? null));
  // --- end CCIP lane ---
  // --- Gateway lane (docs/gateway-lane.md): typed data for the burn intent, transactions else ---
  if (executorKey !== null && GATEWAY_SIGNING_KEYS.has(executorKey)) {
    const g = gatewayEffect(executorKey, config, intent, chainId, evm.tokens, gateway ?? null);
    if (!g.ok) return unavailable(g.reason);
    return g.transaction ? withCap(g.effect) : g.effect;
  }
  // --- end Gateway lane ---

  return unavailable(`executor ${executorKey ?? '(none)'} has no approval-bound effect (name the contract and method in config.contract_call)`);
}

/** A chain's fee cap: listed chains take their own (none: the signer refuses, fee_cap_missing); the fallback is only for a chain the file does not list at all. */
function capOf(evm: ConfigFile['evm'], chainId: number, fallbackFeeCapWei: string | undefined): string | undefined {
  const listed = evm.chains.some((c) => c.chain_id === chainId) || (evm.fee_caps ?? []).some((c) => c.chain_id === chainId);
  return listed ? feeCapOf({ chains: evm.chains, fee_caps: evm.fee_caps ?? [] }, chainId) : fallbackFeeCapWei;
}

// --- Hyperliquid lane ---
/**
 * A Bridge2 deposit: the configured token's `transfer(bridge, amount)` on the bridge's chain, both
 * from the `hyperliquid` section; a node pinning another chain, recipient or token has no effect
 * (the executor refuses it too). The 5 USDC minimum is the executor's to refuse, before signing.
 */
function hyperliquidTopupEffect(
  node: PlanNode,
  config: Record<string, unknown>,
  intent: Record<string, unknown>,
  evm: ConfigFile['evm'],
  hl: HyperliquidConfig | null,
  fallbackFeeCapWei: string | undefined,
): ExpectedEffect {
  if (!hl) return unavailable('no hyperliquid section is configured: a top-up has no bridge to go to');
  const chainId = hl.chain_id;
  const pinnedChain = [config.chain_id, bindingExtras(node.signer_binding).chain_id, bindingExtras(node.executor_binding).chain_id].find((v) => v !== undefined && v !== null);
  if (pinnedChain !== undefined && Number(plain(pinnedChain, 'chain_id')) !== chainId) unavailable(`the node pins chain ${String(pinnedChain)}, the bridge is on chain ${chainId} (hyperliquid.chain_id)`);
  const bridge = address(hl.bridge, 'hyperliquid.bridge');
  if (config.to !== undefined && (typeof config.to !== 'string' || config.to.toLowerCase() !== bridge)) unavailable(`config.to ${JSON.stringify(config.to)} is not the bridge ${bridge}`);
  if (config.token !== undefined && config.token !== hl.token) unavailable(`config.token ${JSON.stringify(config.token)} is not ${hl.token} (hyperliquid.token)`);
  const { token, decimals, symbol } = tokenOf(hl.token, plain(config.decimals, 'config.decimals'), chainId, evm, 'config');
  const amount = toBaseUnits(plain(config.amount ?? intent.amount, 'amount'), decimals);
  const cap = capOf(evm, chainId, fallbackFeeCapWei);
  const effect: ExpectedEffect = { chain_id: chainId, asset: token, to: bridge, amount_base_units: amount, token_method: 'transfer', ...tokenFacts(decimals, symbol) };
  return cap === undefined ? effect : { ...effect, max_fee_per_gas_cap_wei: cap };
}
// --- end Hyperliquid lane ---

/**
 * An EIP-2612 permit: the token's own domain (name and version from evm.tokens[].eip712, the chain,
 * the token as verifying contract), the spender (an address, or `cctp.token_messenger` for the
 * chain's TokenMessengerV2), at most the amount, a deadline at most
 * `deadline_seconds` ahead (default 3600, at most a day), and the nonce when the plan pins one.
 */
function tokenPermitEffect(permit: Record<string, unknown>, chainId: number, evm: ConfigFile['evm']): ExpectedEffect {
  const { token, decimals, symbol } = tokenOf(plain(permit.token, 'config.token_permit.token'), permit.decimals, chainId, evm, 'config.token_permit');
  const listed = evm.tokens.find((t) => t.chain_id === chainId && t.address.toLowerCase() === token);
  const domain = listed?.eip712 ?? unavailable(`token ${token} on chain ${chainId} has no eip712 domain (name, version) in evm.tokens: a permit cannot be checked without it`);
  const rawSpender = plain(permit.spender, 'config.token_permit.spender');
  // The chain's CCTP TokenMessengerV2 by name: the spender of a burn's allowance.
  const spender =
    rawSpender === CCTP_TOKEN_MESSENGER_SPENDER
      ? address(evm.chains.find((c) => c.chain_id === chainId)?.cctp?.token_messenger ?? unavailable(`chain ${chainId} has no cctp entry in evm.chains`), 'evm.chains[].cctp.token_messenger')
      : address(rawSpender, 'config.token_permit.spender');
  const amount = toBaseUnits(plain(permit.amount, 'config.token_permit.amount'), decimals);
  const seconds = plain(permit.deadline_seconds ?? DEFAULT_PERMIT_DEADLINE_SECONDS, 'config.token_permit.deadline_seconds');
  if (typeof seconds !== 'number' || !Number.isInteger(seconds) || seconds < 1 || seconds > MAX_TYPED_DATA_DEADLINE_SECONDS) {
    unavailable(`config.token_permit.deadline_seconds must be an integer from 1 to ${MAX_TYPED_DATA_DEADLINE_SECONDS}`);
  }
  const nonce = permit.nonce === undefined ? undefined : whole(plain(permit.nonce, 'config.token_permit.nonce'), 'config.token_permit.nonce');
  return {
    chain_id: chainId,
    asset: token,
    to: spender,
    amount_base_units: amount,
    token_method: 'permit',
    ...tokenFacts(decimals, symbol),
    typed_data: {
      primary_type: PERMIT_PRIMARY_TYPE,
      domain: { name: domain.name, version: domain.version, chainId, verifyingContract: token },
      deadline_max_seconds: seconds as number,
      ...(nonce !== undefined ? { nonce } : {}),
    },
  };
}

// --- CCTP lane ---
/**
 * depositForBurn on the chain's TokenMessengerV2 with every argument fixed by the plan: amount,
 * destination domain, mint recipient, burn token, destination caller, max fee (max_fee, or
 * max_fee_bps of the amount rounded up; cctp/fees.ts), finality. The
 * signer compares the whole calldata, so the executor cannot burn more, or for someone else.
 */
function cctpBurnEffect(config: Record<string, unknown>, intent: Record<string, unknown>, chainId: number, evm: ConfigFile['evm']): ExpectedEffect {
  const cctp = evm.chains.find((c) => c.chain_id === chainId)?.cctp ?? unavailable(`chain ${chainId} has no cctp entry in evm.chains`);
  let domain: number | null = null;
  const destChainId = plain(config.destination_chain_id, 'config.destination_chain_id');
  if (destChainId !== undefined) {
    const dest = evm.chains.find((c) => c.chain_id === Number(destChainId))?.cctp ?? unavailable(`destination chain ${String(destChainId)} has no cctp entry in evm.chains`);
    domain = dest.domain;
  }
  const rawDomain = plain(config.destination_domain, 'config.destination_domain');
  if (rawDomain !== undefined) {
    if (typeof rawDomain !== 'number' || !Number.isInteger(rawDomain) || rawDomain < 0) unavailable('config.destination_domain is not a CCTP domain id');
    if (domain !== null && domain !== rawDomain) unavailable(`config.destination_domain ${String(rawDomain)} is not the domain of config.destination_chain_id (${domain})`);
    domain = rawDomain as number;
  }
  if (domain === null) unavailable('the burn names neither config.destination_chain_id nor config.destination_domain');
  const { token, decimals, symbol } = tokenOf(plain(config.token ?? intent.asset, 'token'), plain(config.decimals, 'config.decimals'), chainId, evm, 'config');
  const amount = BigInt(toBaseUnits(plain(config.amount ?? intent.amount, 'amount'), decimals));
  const recipient = address(plain(config.mint_recipient ?? destinationOf(intent), 'mint recipient'), 'mint recipient');
  const rawCaller = plain(config.destination_caller, 'config.destination_caller');
  const caller = rawCaller === undefined || rawCaller === null ? zeroAddress : address(rawCaller, 'config.destination_caller');
  // max_fee or max_fee_bps of the approved amount (ceil), 0 when neither: as the executor computes it.
  const fee = maxFeeOf({ max_fee: plain(config.max_fee, 'config.max_fee'), max_fee_bps: plain(config.max_fee_bps, 'config.max_fee_bps') }, amount, decimals);
  if (!fee.ok) unavailable(`config: ${fee.detail}`);
  const maxFee = fee.ok ? fee.value.maxFee : 0n;
  const threshold = plain(config.min_finality_threshold ?? 2000, 'config.min_finality_threshold');
  if (typeof threshold !== 'number' || !Number.isInteger(threshold)) unavailable('config.min_finality_threshold is not an integer');
  const data = encodeDepositForBurn({
    amount,
    destinationDomain: domain as number,
    mintRecipient: recipient as `0x${string}`,
    burnToken: token as `0x${string}`,
    destinationCaller: caller as `0x${string}`,
    maxFee,
    minFinalityThreshold: threshold as number,
  });
  return {
    chain_id: chainId,
    asset: 'native',
    to: address(cctp.token_messenger, 'evm.chains[].cctp.token_messenger'),
    amount_base_units: '0',
    call: { method: DEPOSIT_FOR_BURN_SIGNATURE, selector: toFunctionSelector(DEPOSIT_FOR_BURN_SIGNATURE), data: data.toLowerCase() },
    ...tokenFacts(decimals, symbol),
  };
}
// --- end CCTP lane ---

// --- USDT0 lane ---
/**
 * An OFT `send` on the source chain's deployment with its SendParam fixed by the plan: destination
 * eid (of destination_chain_id's deployment, or destination_eid; both must agree), recipient
 * (config.to or the intent's destination), amount, minimum amount (config.min_amount, default the
 * amount itself: nothing may be lost on the way), extra options (config.extra_options, default
 * none), no compose message, no OFT command; the native fee cap (config.max_native_fee_wei,
 * required) and the refund address (config.refund_address, default the sender). An amount with dust
 * below the 6 shared decimals has no effect: the OFT would keep part of what the approver saw.
 */
function usdt0SendEffect(config: Record<string, unknown>, intent: Record<string, unknown>, chainId: number, evm: ConfigFile['evm'], usdt0: Usdt0Config | null): ExpectedEffect {
  if (!usdt0) return unavailable('no usdt0 section is configured: a send has no OFT to go through');
  const source = usdt0.deployments.find((d) => d.chain_id === chainId) ?? unavailable(`chain ${chainId} has no usdt0 deployment`);
  let dstEid: number | null = null;
  const destChainId = plain(config.destination_chain_id, 'config.destination_chain_id');
  if (destChainId !== undefined) {
    dstEid = (usdt0.deployments.find((d) => d.chain_id === Number(destChainId)) ?? unavailable(`destination chain ${String(destChainId)} has no usdt0 deployment`)).eid;
  }
  const rawEid = plain(config.destination_eid, 'config.destination_eid');
  if (rawEid !== undefined) {
    if (typeof rawEid !== 'number' || !Number.isInteger(rawEid) || rawEid <= 0) unavailable('config.destination_eid is not a LayerZero endpoint id');
    if (dstEid !== null && dstEid !== rawEid) unavailable(`config.destination_eid ${String(rawEid)} is not the eid of config.destination_chain_id (${dstEid})`);
    dstEid = rawEid as number;
  }
  if (dstEid === null) unavailable('the send names neither config.destination_chain_id nor config.destination_eid');
  if (!usdt0.deployments.some((d) => d.eid === dstEid)) unavailable(`eid ${String(dstEid)} has no usdt0 deployment: its credit could not be observed`);
  if (dstEid === source.eid) unavailable(`the destination eid ${source.eid} is the source chain's own`);
  const tokenRef = plain(config.token ?? intent.asset ?? source.token, 'token');
  const { token, decimals, symbol } = tokenOf(tokenRef, plain(config.decimals, 'config.decimals'), chainId, evm, 'config');
  const deployed = evm.tokens.find((t) => t.chain_id === chainId && t.symbol === source.token);
  if (!deployed || deployed.address.toLowerCase() !== token) unavailable(`token ${String(tokenRef)} is not ${source.token}, the token of chain ${chainId}'s usdt0 deployment`);
  const amount = BigInt(toBaseUnits(plain(config.amount ?? intent.amount, 'amount'), decimals));
  const rate = 10n ** BigInt(Math.max(0, decimals - DEFAULT_SHARED_DECIMALS));
  if (amount % rate !== 0n) unavailable(`amount has dust below the ${DEFAULT_SHARED_DECIMALS} shared decimals: the OFT would send ${(amount / rate) * rate} base units of ${amount}`);
  const min = config.min_amount === undefined ? amount : BigInt(toBaseUnitsOrZero(plain(config.min_amount, 'config.min_amount'), decimals));
  if (min > amount) unavailable('config.min_amount is above the amount');
  const recipient = address(plain(config.to ?? destinationOf(intent), 'recipient'), 'recipient');
  const rawOptions = plain(config.extra_options ?? '0x', 'config.extra_options');
  if (typeof rawOptions !== 'string' || !/^0x([0-9a-fA-F]{2})*$/.test(rawOptions) || (rawOptions !== '0x' && !rawOptions.toLowerCase().startsWith('0x0003'))) {
    unavailable('config.extra_options must be hex: empty, or type-3 options (0x0003...)');
  }
  if (config.max_native_fee_wei === undefined) unavailable('config.max_native_fee_wei is required: the approved cap of the LayerZero fee the send pays in native coin');
  const cap = whole(plain(config.max_native_fee_wei, 'config.max_native_fee_wei'), 'config.max_native_fee_wei');
  const rawRefund = plain(config.refund_address, 'config.refund_address');
  const refund = rawRefund === undefined || rawRefund === null ? undefined : address(rawRefund, 'config.refund_address');
  return {
    chain_id: chainId,
    asset: token,
    to: address(source.oft, 'usdt0.deployments[].oft'),
    amount_base_units: amount.toString(),
    call: { method: SEND_SIGNATURE, selector: SEND_SELECTOR },
    oft_send: {
      dst_eid: dstEid as number,
      to: addressToBytes32(recipient),
      amount_ld: amount.toString(),
      min_amount_ld: min.toString(),
      extra_options: (rawOptions as string).toLowerCase(),
      compose_msg: '0x',
      oft_cmd: '0x',
      max_native_fee_wei: cap,
      ...(refund ? { refund_address: refund } : {}),
    },
    ...tokenFacts(decimals, symbol),
  };
}

/** As toBaseUnits, but "0" is a valid minimum (a plan may accept any amount received, if it says so). */
function toBaseUnitsOrZero(value: unknown, decimals: number): string {
  const text = typeof value === 'number' && Number.isFinite(value) && value >= 0 ? String(value) : value;
  if (typeof text === 'string' && /^0+(\.0+)?$/.test(text)) return '0';
  return toBaseUnits(value, decimals);
}
// --- end USDT0 lane ---

// --- CCIP lane ---
/**
 * A Router `ccipSend` on the source chain's ccip entry with its message fixed by the plan: the
 * destination (config.destination_chain_id, a chain of the ccip section, not the source), the
 * receiver (config.to or the intent's destination), one token amount (a token of ccip.tokens and the
 * amount), no data, EVMExtraArgsV2 of config.gas_limit (default 0) and
 * config.allow_out_of_order_execution (default true), the fee in native coin and its cap
 * (config.max_fee_wei, required).
 */
function ccipSendEffect(plan: unknown, node: PlanNode, config: Record<string, unknown>, intent: Record<string, unknown>, chainId: number, evm: ConfigFile['evm'], ccip: CcipConfig | null): ExpectedEffect {
  if (!ccip) return unavailable('no ccip section is configured: a send has no Router to go through');
  const source = ccip.chains.find((c) => c.chain_id === chainId) ?? unavailable(`chain ${chainId} has no ccip entry`);
  const destChainId = plain(config.destination_chain_id, 'config.destination_chain_id');
  if (destChainId === undefined) unavailable('the send names no config.destination_chain_id');
  const destination = ccip.chains.find((c) => c.chain_id === Number(destChainId)) ?? unavailable(`destination chain ${String(destChainId)} has no ccip entry: its delivery could not be observed`);
  if (destination.chain_id === source.chain_id) unavailable(`the destination chain ${chainId} is the source chain`);
  if (BigInt(destination.selector) > MAX_UINT64) unavailable('the destination selector is not a uint64');
  const tokenRef = plain(config.token ?? intent.asset, 'token');
  const { token, decimals, symbol } = tokenOf(tokenRef, plain(config.decimals, 'config.decimals'), chainId, evm, 'config');
  if (symbol === undefined || !ccip.tokens.includes(symbol)) unavailable(`token ${String(tokenRef)} is not one of ccip.tokens`);
  const amount = toBaseUnits(plain(config.amount ?? intent.amount, 'amount'), decimals);
  const recipient = address(plain(config.to ?? destinationOf(intent), 'recipient'), 'recipient');
  const gas = plain(config.gas_limit ?? 0, 'config.gas_limit');
  if (typeof gas !== 'number' || !Number.isSafeInteger(gas) || gas < 0) unavailable('config.gas_limit must be a whole number of gas');
  const ooo = plain(config.allow_out_of_order_execution ?? true, 'config.allow_out_of_order_execution');
  if (typeof ooo !== 'boolean') unavailable('config.allow_out_of_order_execution must be true or false');
  if (config.max_fee_wei === undefined) unavailable('config.max_fee_wei is required: the approved cap of the CCIP fee, in the fee token\'s base units (wei of native coin by default)');
  const cap = whole(plain(config.max_fee_wei, 'config.max_fee_wei'), 'config.max_fee_wei');
  const feeToken = ccipFeeTokenOf(plain(config.fee_token, 'config.fee_token'), chainId, evm, ccip);
  if (feeToken !== zeroAddress && feeToken === token) unavailable('config.fee_token is the token sent: the Router would pull both from one allowance');
  if (feeToken !== zeroAddress) ccipFeeApprovalBefore(plan, node, String(config.fee_token), chainId, evm, BigInt(cap));
  return {
    chain_id: chainId,
    asset: token,
    to: address(source.router, 'ccip.chains[].router'),
    amount_base_units: amount,
    call: { method: CCIP_SEND_SIGNATURE, selector: CCIP_SEND_SELECTOR },
    ccip_send: {
      dest_chain_selector: destination.selector,
      destination_chain_id: destination.chain_id,
      receiver: encodeReceiver(recipient),
      token,
      amount,
      data: '0x',
      fee_token: feeToken,
      extra_args: encodeExtraArgs(BigInt(gas as number), ooo as boolean),
      max_fee_wei: cap,
    },
    ...tokenFacts(decimals, symbol),
  };
}

/**
 * A send paying its fee in a token: the Router pulls getFee() of it, which the transaction does not
 * show, so the plan must bound it on chain. A direct predecessor approves that token to the chain's
 * Router (config.token_approval, spender ccip.router) for at most the cap: an approve sets the
 * allowance, so the send can cost no more than the approved plan says.
 */
function ccipFeeApprovalBefore(plan: unknown, node: PlanNode, symbol: string, chainId: number, evm: ConfigFile['evm'], cap: bigint): void {
  const predecessors = (node as PlanNode & { predecessors?: unknown }).predecessors;
  const keys = Array.isArray(predecessors) ? predecessors.filter((k): k is string => typeof k === 'string') : [];
  const decimals = evm.tokens.find((t) => t.chain_id === chainId && t.symbol === symbol)?.decimals;
  const bounds = keys.some((k) => {
    const p = planNode(plan, k);
    const a = p.config?.token_approval as Record<string, unknown> | undefined;
    if (!a || typeof a !== 'object' || a.token !== symbol || a.spender !== CCIP_ROUTER_SPENDER || decimals === undefined) return false;
    if (chainIdOf(p, p.config ?? {}, evm) !== chainId) return false;
    return BigInt(toBaseUnits(plain(a.amount, 'config.token_approval.amount'), decimals)) <= cap;
  });
  if (!bounds) unavailable(`a send paying its fee in ${symbol} needs a node right before it approving ${symbol} to ccip.router for at most config.max_fee_wei (${cap} base units): the fee is pulled by the Router, not carried by the transaction`);
}

/** config.fee_token of a CCIP send: unset or "native" is native coin (address 0); else a symbol of ccip.fee_tokens, its address from evm.tokens. */
function ccipFeeTokenOf(ref: unknown, chainId: number, evm: ConfigFile['evm'], ccip: CcipConfig): string {
  if (ref === undefined || ref === 'native') return zeroAddress;
  if (typeof ref !== 'string' || !(ccip.fee_tokens ?? []).includes(ref)) return unavailable(`config.fee_token ${JSON.stringify(ref)} is not one of ccip.fee_tokens`);
  const listed = evm.tokens.find((t) => t.chain_id === chainId && t.symbol === ref) ?? unavailable(`fee token ${ref} is not listed in evm.tokens for chain ${chainId}`);
  return address(listed.address, 'evm.tokens[].address');
}
// --- end CCIP lane ---

/** The token (lowercase address) and its trusted decimals: from the node, else evm.tokens; never from the chain. */
function tokenOf(tokenRef: unknown, nodeDecimals: unknown, chainId: number, evm: ConfigFile['evm'], where: string): { token: string; decimals: number; symbol?: string } {
  if (typeof tokenRef !== 'string' || tokenRef.length === 0) return unavailable('the node names no token');
  const byAddress = isAddress(tokenRef, { strict: false });
  const listed = byAddress
    ? evm.tokens.find((t) => t.chain_id === chainId && t.address.toLowerCase() === tokenRef.toLowerCase())
    : evm.tokens.find((t) => t.chain_id === chainId && t.symbol === tokenRef);
  if (!listed && !byAddress) unavailable(`token ${tokenRef} is not listed in evm.tokens for chain ${chainId}`);
  const token = byAddress ? address(tokenRef, 'token') : listed!.address.toLowerCase();
  if (nodeDecimals !== undefined && (typeof nodeDecimals !== 'number' || !Number.isInteger(nodeDecimals) || nodeDecimals < 0 || nodeDecimals > 36)) {
    unavailable(`${where}.decimals must be an integer from 0 to 36`);
  }
  if (nodeDecimals !== undefined && listed?.decimals !== undefined && nodeDecimals !== listed.decimals) {
    unavailable(`${where}.decimals ${String(nodeDecimals)} differs from evm.tokens (${listed.decimals})`);
  }
  const decimals = (nodeDecimals as number | undefined) ?? listed?.decimals;
  // Only trusted decimals: the chain's answer would be the executor's word, not the approval's.
  if (decimals === undefined) return unavailable(`decimals of token ${token} are given neither by the node config nor by evm.tokens`);
  return { token, decimals, ...(listed ? { symbol: listed.symbol } : {}) };
}

/** The decimals a token amount was computed with, and its symbol when evm.tokens lists it: pinned with the effect. */
function tokenFacts(decimals: number, symbol: string | undefined): Pick<ExpectedEffect, 'token_decimals' | 'token_symbol'> {
  return { token_decimals: decimals, ...(symbol ? { token_symbol: symbol } : {}) };
}

function planNode(plan: unknown, nodeKey: string): PlanNode {
  const nodes = plan !== null && typeof plan === 'object' ? (plan as { nodes?: unknown }).nodes : undefined;
  if (!Array.isArray(nodes)) return unavailable('the compiled plan has no nodes');
  const node = nodes.find((n) => n !== null && typeof n === 'object' && (n as PlanNode).node_key === nodeKey) as PlanNode | undefined;
  if (!node) return unavailable(`node ${nodeKey} is not in the compiled plan`);
  return node;
}

/** From the node config, else the signer binding, else the executor binding, else the signer's only configured chain. */
function chainIdOf(node: PlanNode, config: Record<string, unknown>, evm: ConfigFile['evm']): number {
  const sources: Array<[string, unknown]> = [
    ['config.chain_id', config.chain_id],
    ['signer_binding.chain_id', bindingExtras(node.signer_binding).chain_id],
    ['executor_binding.chain_id', bindingExtras(node.executor_binding).chain_id],
  ];
  let found: { from: string; id: number } | null = null;
  for (const [from, raw] of sources) {
    if (raw === undefined || raw === null) continue;
    const v = plain(raw, from);
    const id = typeof v === 'string' && WHOLE.test(v) ? Number(v) : v;
    if (typeof id !== 'number' || !Number.isSafeInteger(id) || id <= 0) return unavailable(`${from} is not a positive integer`);
    if (found && found.id !== id) return unavailable(`${found.from} (${found.id}) and ${from} (${id}) disagree`);
    found ??= { from, id };
  }
  if (found) return found.id;
  const signerKey = bindingKey(node.signer_binding, 'signer_key');
  const entry = evm.signers.find((s) => s.key === signerKey);
  if (entry && entry.chains.length === 1) return entry.chains[0]!;
  return unavailable('the plan pins no chain id (config.chain_id or the signer binding\'s chain_id)');
}

/** A value from the approved plan itself: a `$ref` would come from a predecessor's output. */
function plain(value: unknown, what: string): unknown {
  if (typeof value === 'string' && value.startsWith(REF_PREFIX)) {
    unavailable(`${what} is a reference to another node's output (${value}), not a value the approval fixed`);
  }
  return value;
}

function object(value: unknown, what: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return unavailable(`${what} must be an object`);
  return value as Record<string, unknown>;
}

function destinationOf(intent: Record<string, unknown>): unknown {
  const d = intent.destination;
  return d !== null && typeof d === 'object' ? (d as Record<string, unknown>).address : d;
}

function address(value: unknown, what: string): string {
  if (typeof value !== 'string' || !isAddress(value, { strict: false })) return unavailable(`${what} is not an EVM address`);
  // A mixed-case address must carry a valid checksum (as the executors require).
  const body = value.slice(2);
  if (body !== body.toLowerCase() && body !== body.toUpperCase() && getAddress(value) !== value) unavailable(`${what} has an invalid checksum`);
  if (value.toLowerCase() === zeroAddress) unavailable(`${what} is the zero address`);
  return value.toLowerCase();
}

function whole(value: unknown, what: string): string {
  const text = typeof value === 'number' && Number.isSafeInteger(value) ? String(value) : value;
  if (typeof text !== 'string' || !WHOLE.test(text)) return unavailable(`${what} is not a whole number`);
  return BigInt(text).toString();
}

/** "100.25" with 6 decimals -> "100250000", exactly (no floats); more fractional digits than decimals is refused. */
function toBaseUnits(value: unknown, decimals: number): string {
  const text = typeof value === 'number' && Number.isFinite(value) && value >= 0 ? String(value) : value;
  const m = typeof text === 'string' ? DECIMAL.exec(text) : null;
  if (!m) return unavailable(`amount ${JSON.stringify(value ?? null)} is not a decimal number of token units`);
  const fraction = m[2] ?? '';
  if (fraction.replace(/0+$/, '').length > decimals) return unavailable(`amount ${text as string} has more than ${decimals} fractional digits`);
  const units = BigInt(m[1]!) * 10n ** BigInt(decimals) + BigInt((fraction + '0'.repeat(decimals)).slice(0, decimals) || '0');
  if (units === 0n) return unavailable('amount must be more than zero');
  return units.toString();
}
