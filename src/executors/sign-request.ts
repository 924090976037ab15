import type { ConfigFile } from '../config-file.ts';
import type { FerryConfig } from '../config.ts';
import type { AuditEntry } from '../persistence/audit.ts';
import { isMovementError } from './errors.ts';
import { EFFECT_CHANGED_RULE, resolveSigningEffect } from './evm/expected-effect.ts';
import { violation } from './signers/evm-policy.ts';
import type { ExecutionContext, PreparedAction, ReplacedVersion, SignRequest } from './protocol.ts';

/**
 * What of Ferry's configuration a signing node's expected effect is derived from (the EVM chains
 * and tokens, the legacy single-chain fee cap, the Hyperliquid bridge). Every caller that pins,
 * derives or signs an effect takes it from here, so a lane whose effect needs its own section adds
 * it once.
 */
export function effectConfigOf(config: Pick<FerryConfig, 'file'> & Partial<Pick<FerryConfig, 'evmMaxFeePerGasCapWei'>>): {
  evm: ConfigFile['evm'];
  fallbackFeeCapWei?: string;
  hyperliquid?: ConfigFile['hyperliquid'];
  usdt0?: ConfigFile['usdt0'];
  ccip?: ConfigFile['ccip'];
  gateway?: ConfigFile['gateway'];
} {
  return { evm: config.file.evm, fallbackFeeCapWei: config.evmMaxFeePerGasCapWei, hyperliquid: config.file.hyperliquid, usdt0: config.file.usdt0, ccip: config.file.ccip, gateway: config.file.gateway };
}

/**
 * The SignRequest the dispatcher sends for a prepared action. Besides the reference protocol's
 * fields it says which executor the payload comes from, carries the approval's evidence (attempt,
 * approved plan hash) and the expected effect pinned for the node when its movement was created
 * (ctx.expected_effect; derived from the approved plan and the configuration of now for a node
 * without one, see evm/expected-effect.ts resolveSigningEffect); when there is none, the reason,
 * so the signer's refusal can name it. Pure.
 * @throws FatalMovementError SIGNER_POLICY_VIOLATION (effect_changed_since_approval) when the
 *         configuration of now would make the pinned effect another one (decimals, symbol, token...).
 */
export function buildSignRequest(input: {
  ctx: ExecutionContext;
  prepared: PreparedAction;
  /** The request's compiled plan, as approved. */
  plan: unknown;
  evm: ConfigFile['evm'];
  /** FERRY_EVM_MAX_FEE_PER_GAS_CAP_WEI, for the chain of FERRY_EVM_RPC_URL (see deriveExpectedEffect). */
  fallbackFeeCapWei?: string;
  /** Ferry's `config.file.hyperliquid`: a top-up's bridge and token (see deriveExpectedEffect). */
  hyperliquid?: ConfigFile['hyperliquid'];
  /** Ferry's `config.file.usdt0`: the OFT deployments of a USDT0 send (see deriveExpectedEffect). */
  usdt0?: ConfigFile['usdt0'];
  /** Ferry's `config.file.ccip`: the Routers and tokens of a CCIP send (see deriveExpectedEffect). */
  ccip?: ConfigFile['ccip'];
  /** Ferry's `config.file.gateway`: the wallets and minters of a Gateway node (see deriveExpectedEffect). */
  gateway?: ConfigFile['gateway'];
  /** For a replacement: the attempt's original version, from Ferry's own records (see ReplacedVersionSchema). */
  replaces?: ReplacedVersion;
  /** For an operator's cancel: the attempt's original version, from Ferry's own records (see SignRequestSchema.cancels). */
  cancels?: ReplacedVersion;
}): SignRequest {
  const { ctx, prepared } = input;
  const destination = ctx.intent.destination;
  const pinned = ctx.expected_effect === undefined && ctx.expected_effect_unavailable === undefined ? null : { effect: ctx.expected_effect ?? null, unavailable: ctx.expected_effect_unavailable ?? null };
  const derived = resolveSigningEffect(pinned, { plan: input.plan, nodeKey: ctx.node_key, intent: ctx.intent, evm: input.evm, fallbackFeeCapWei: input.fallbackFeeCapWei, hyperliquid: input.hyperliquid, usdt0: input.usdt0, ccip: input.ccip, gateway: input.gateway });
  if (!derived.ok && derived.changed !== undefined) {
    throw violation(EFFECT_CHANGED_RULE, `node ${ctx.node_key} is not signed: ${derived.reason}; its pinned effect rules, and it no longer matches Ferry's configuration`, {
      actual: derived.changed,
    });
  }
  return {
    protocol_version: ctx.protocol_version,
    request_id: ctx.request_id,
    request_node_id: ctx.request_node_id,
    attempt_no: ctx.attempt_no,
    compiled_plan_hash: ctx.compiled_plan_hash,
    signing_intent: {
      action: prepared.action_type,
      asset: String(ctx.intent.asset ?? ''),
      amount: String(ctx.intent.amount ?? ctx.input_params.amount ?? ''),
      destination: String(
        destination && typeof destination === 'object' ? (destination as Record<string, unknown>).address ?? '' : destination ?? '',
      ),
      max_fee_usd: null,
      chain_family: String(ctx.input_params.chain_family ?? 'evm'),
      allowed_payload_hash: prepared.payload_hash,
    },
    payload_format: prepared.payload_format,
    payload: prepared.payload ?? '',
    payload_hash: prepared.payload_hash,
    metadata: ctx.input_params,
    executor_key: ctx.resolved_bindings.executor.executor_key,
    expected_effect: derived.ok ? derived.effect : null,
    expected_effect_unavailable: derived.ok ? null : derived.reason,
    ...(input.replaces ? { replaces: input.replaces } : {}),
    ...(input.cancels ? { cancels: input.cancels } : {}),
  };
}

/**
 * The audit record of a refused signature (the node FAILS with the same code in the same
 * transaction): who refused, for which executor, and which policy rule failed. The details hold
 * codes, addresses and amounts only, never key material.
 */
export function signingRefusalAudit(
  ctx: ExecutionContext,
  err: unknown,
  code: string,
  opts: { actor?: string; details?: Record<string, unknown> } = {},
): AuditEntry {
  const details = isMovementError(err) ? err.details : {};
  return {
    actor: opts.actor ?? 'worker:dispatcher',
    action: 'signer.refused',
    entity_type: 'movement_node',
    entity_id: ctx.request_node_id,
    details: {
      request_id: ctx.request_id,
      node_key: ctx.node_key,
      attempt_no: ctx.attempt_no,
      executor_key: ctx.resolved_bindings.executor.executor_key,
      signer_key: ctx.resolved_bindings.signer?.signer_key ?? null,
      error_code: code,
      ...(typeof details.rule === 'string' ? { rule: details.rule } : {}),
      ...(typeof details.expected === 'string' || typeof details.expected === 'number' ? { expected: details.expected } : {}),
      ...(typeof details.actual === 'string' || typeof details.actual === 'number' ? { actual: details.actual } : {}),
      ...opts.details,
    },
  };
}
