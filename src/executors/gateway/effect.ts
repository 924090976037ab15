import { encodeFunctionData, toFunctionSelector } from 'viem';
import type { EvmTokenConfig } from '../../config-file.ts';
import type { ExpectedEffect } from '../protocol.ts';
import { BURN_INTENT_PRIMARY_TYPE, DEPOSIT_SIGNATURE, GATEWAY_DOMAIN, GATEWAY_MINT_SIGNATURE, gatewayWalletAbi } from './codec.ts';
import { GATEWAY_APPROVE_KEY, GATEWAY_DEPOSIT_KEY, GATEWAY_INTENT_KEY, GATEWAY_MINT_KEY } from './common.ts';
import type { GatewayConfig } from './config.ts';
import { gatewayAmountOf, gatewayBurnSpecOf, gatewayEntry } from './spec.ts';

/** The Gateway lane's signing executors: the ones with an approval-bound effect. */
export const GATEWAY_SIGNING_KEYS: ReadonlySet<string> = new Set([GATEWAY_APPROVE_KEY, GATEWAY_DEPOSIT_KEY, GATEWAY_INTENT_KEY, GATEWAY_MINT_KEY]);

/**
 * The expected effect of a Gateway node (the fee cap aside, which the caller adds to a
 * transaction's): pure, from the plan's node config, the intent and the configuration.
 * - approve: the token's `approve(GatewayWallet, amount)` on the node's chain;
 * - deposit: `deposit(token, amount)` on the GatewayWallet, its whole calldata;
 * - intent: typed data, a BurnIntent under the GatewayWallet domain, its TransferSpec fixed field
 *   by field (domains, wallet and minter, tokens, recipient, caller, value) and its maxFee capped;
 *   the depositor and signer are the signing wallet itself (the signer checks that);
 * - mint: `gatewayMint(bytes,bytes)` on the destination chain's GatewayMinter (the attestation
 *   comes from Gateway, after the approval, so only the method and contract are fixed).
 */
export function gatewayEffect(
  executorKey: string,
  config: Record<string, unknown>,
  intent: Record<string, unknown>,
  chainId: number,
  tokens: readonly EvmTokenConfig[],
  g: GatewayConfig | null,
): { ok: true; effect: ExpectedEffect; transaction: boolean } | { ok: false; reason: string } {
  if (!g) return { ok: false, reason: 'no gateway section is configured' };
  const bad = (r: { code: string; detail: string }) => ({ ok: false, reason: `${r.code}: ${r.detail}` }) as const;
  const facts = (t: { decimals: number; symbol: string }) => ({ token_decimals: t.decimals, token_symbol: t.symbol });
  if (executorKey === GATEWAY_APPROVE_KEY || executorKey === GATEWAY_DEPOSIT_KEY) {
    const a = gatewayAmountOf(g, chainId, tokens, config, intent);
    if (!a.ok) return bad(a);
    const { entry, token, amount } = a.value;
    const wallet = entry.wallet.toLowerCase();
    if (executorKey === GATEWAY_APPROVE_KEY) {
      return { ok: true, transaction: true, effect: { chain_id: chainId, asset: token.address, to: wallet, amount_base_units: amount.toString(), token_method: 'approve', ...facts(token) } };
    }
    const data = encodeFunctionData({ abi: gatewayWalletAbi, functionName: 'deposit', args: [token.address, amount] }).toLowerCase();
    return {
      ok: true,
      transaction: true,
      effect: { chain_id: chainId, asset: 'native', to: wallet, amount_base_units: '0', call: { method: DEPOSIT_SIGNATURE, selector: toFunctionSelector(DEPOSIT_SIGNATURE), data }, ...facts(token) },
    };
  }
  if (executorKey === GATEWAY_INTENT_KEY) {
    const s = gatewayBurnSpecOf(g, chainId, tokens, config, intent);
    if (!s.ok) return bad(s);
    const v = s.value;
    return {
      ok: true,
      transaction: false,
      effect: {
        chain_id: chainId,
        asset: v.sourceToken.address,
        to: v.source.wallet.toLowerCase(),
        amount_base_units: v.value.toString(),
        ...facts(v.sourceToken),
        gateway_burn: {
          source_domain: v.source.domain,
          destination_domain: v.destination.domain,
          destination_chain_id: v.destination.chain_id,
          source_contract: v.source.wallet.toLowerCase(),
          destination_contract: v.destination.minter.toLowerCase(),
          source_token: v.sourceToken.address,
          destination_token: v.destinationToken.address,
          destination_recipient: v.recipient,
          destination_caller: v.destinationCaller,
          value: v.value.toString(),
          max_fee: v.maxFee.toString(),
          max_blocks_ahead: g.intent_validity_blocks,
        },
        typed_data: { primary_type: BURN_INTENT_PRIMARY_TYPE, domain: { ...GATEWAY_DOMAIN } },
      },
    };
  }
  if (executorKey === GATEWAY_MINT_KEY) {
    const entry = gatewayEntry(g, chainId);
    if (!entry.ok) return bad(entry);
    return {
      ok: true,
      transaction: true,
      effect: { chain_id: chainId, asset: 'native', to: entry.value.minter.toLowerCase(), amount_base_units: '0', call: { method: GATEWAY_MINT_SIGNATURE, selector: toFunctionSelector(GATEWAY_MINT_SIGNATURE) } },
    };
  }
  return { ok: false, reason: `${executorKey} is not a signing executor of the gateway lane` };
}
