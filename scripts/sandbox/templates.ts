import { CEX_WITHDRAWAL_ACTION_KEY, CEX_WITHDRAWAL_OBSERVE_KEY } from '../../src/executors/cex/index.ts';
import { EVM_BALANCE_OBSERVE_KEY, EVM_ERC20_TRANSFER_KEY, EVM_FINALITY_OBSERVE_KEY } from '../../src/executors/evm/index.ts';

/**
 * The intent every sandbox template takes (docs/templates.md, "Intent schema"): the token it is
 * bound to and nothing else, an amount with that token's decimals, and, where the intent names the
 * recipient, an EVM address. Anything else is refused when the movement is created.
 */
export function tokenIntentSchema(token: string, decimals: number, opts: { destination: boolean }): Record<string, unknown> {
  return {
    fields: {
      asset: { type: 'asset', allowed: [token] },
      amount: { type: 'amount', decimals, min: decimals >= 2 ? '0.01' : '1', max: '1000000' },
      ...(opts.destination ? { destination: { type: 'evm_address' } } : {}),
    },
  };
}

/**
 * `usdc.transfer`: send USDC from the sandbox hot wallet to intent.destination.address, then wait
 * until that transaction has `confirmations` blocks.
 */
export function usdcTransferTemplate(opts: { chainId: number; signerKey: string; confirmations: number }): Record<string, unknown> {
  return {
    template_key: 'usdc.transfer',
    description: 'Sandbox: an ERC-20 transfer of USDC from the hot wallet, then its finality check.',
    nodes: [
      {
        node_key: 'transfer',
        node_kind: 'action',
        action_type: 'erc20_transfer',
        executor_binding: EVM_ERC20_TRANSFER_KEY,
        signer_binding: { signer_key: opts.signerKey, chain_id: opts.chainId },
        config: { token: 'USDC', decimals: 6 },
      },
      {
        node_key: 'finality',
        node_kind: 'observe',
        action_type: 'chain_finality',
        executor_binding: { executor_key: EVM_FINALITY_OBSERVE_KEY, chain_id: opts.chainId },
        config: { tx_hash: '$ref:transfer.tx_hash', confirmations: opts.confirmations },
      },
    ],
    edges: [{ from: 'transfer', to: 'finality' }],
    intent_schema: tokenIntentSchema('USDC', 6, { destination: true }),
  };
}

/**
 * `usdc.reviewed_transfer`: `usdc.transfer` behind a manual gate. The gate `review` waits, READY,
 * until a person other than the requester confirms it (what they checked, as a note) or skips it
 * (docs/operations.md, "Manual gates"); only then is the transfer signed and sent.
 */
export function reviewedTransferTemplate(opts: { chainId: number; signerKey: string; confirmations: number }): Record<string, unknown> {
  const base = usdcTransferTemplate(opts);
  return {
    ...base,
    template_key: 'usdc.reviewed_transfer',
    description: 'Sandbox: a person reviews the transfer at a manual gate, then USDC is sent from the hot wallet and its finality checked.',
    nodes: [
      { node_key: 'review', node_kind: 'manual_gate', action_type: 'manual_review', executor_binding: 'exec.sim.action' },
      ...(base.nodes as Array<Record<string, unknown>>),
    ],
    edges: [{ from: 'review', to: 'transfer' }, ...(base.edges as Array<Record<string, unknown>>)],
  };
}

// --- CCTP lane ---
/**
 * `cctp_bridge`: burn USDC on the source chain (CCTP v2 depositForBurn), wait for Circle's
 * attestation of the burn's message, receive it on the destination chain (receiveMessage mints to
 * intent.destination.address), then check the recipient holds what the attested message mints
 * (intent.amount less the fee Circle executed, at most the approved max fee).
 *
 * The burn's max fee and finality are in the plan the approver sees: `max_fee` (token units, "0" by
 * default) or `max_fee_bps` (of the amount, rounded up), and `min_finality_threshold` (2000
 * standard by default, 1000 fast). A chain minimum or a fast-transfer quote above the approved max
 * fee fails the burn before anything is signed (docs/cctp-lane.md).
 */
export function cctpBridgeTemplate(opts: {
  sourceChainId: number;
  destinationChainId: number;
  signerKey: string;
  /** The destination's signer (default: the same key, which signs for both chains). */
  mintSignerKey?: string;
  token?: string;
  decimals?: number;
  templateKey?: string;
  /** The burn's max fee in token units (default "0"); or maxFeeBps, basis points of the amount. */
  maxFee?: string;
  maxFeeBps?: string;
  /** 2000 standard (default) or 1000 fast. */
  minFinalityThreshold?: number;
}): Record<string, unknown> {
  const token = opts.token ?? 'USDC';
  const decimals = opts.decimals ?? 6;
  const fee = opts.maxFeeBps !== undefined ? { max_fee_bps: opts.maxFeeBps } : { max_fee: opts.maxFee ?? '0' };
  return {
    template_key: opts.templateKey ?? 'cctp_bridge',
    description: 'CCTP v2: burn on the source chain, attestation, mint on the destination chain, balance check there.',
    nodes: [
      {
        node_key: 'burn',
        node_kind: 'action',
        action_type: 'cctp_burn',
        executor_binding: 'exec.cctp.burn',
        signer_binding: { signer_key: opts.signerKey, chain_id: opts.sourceChainId },
        config: { chain_id: opts.sourceChainId, destination_chain_id: opts.destinationChainId, token, decimals, ...fee, min_finality_threshold: opts.minFinalityThreshold ?? 2000 },
      },
      {
        node_key: 'attestation',
        node_kind: 'observe',
        action_type: 'cctp_attestation',
        executor_binding: 'exec.observe.cctp_attestation',
        config: { tx_hash: '$ref:burn.tx_hash' },
      },
      {
        node_key: 'mint',
        node_kind: 'action',
        action_type: 'cctp_mint',
        executor_binding: 'exec.cctp.mint',
        signer_binding: { signer_key: opts.mintSignerKey ?? opts.signerKey, chain_id: opts.destinationChainId },
        config: { chain_id: opts.destinationChainId, message: '$ref:attestation.message', attestation: '$ref:attestation.attestation' },
      },
      {
        node_key: 'arrived',
        node_kind: 'observe',
        action_type: 'chain_receive',
        executor_binding: { executor_key: EVM_BALANCE_OBSERVE_KEY, chain_id: opts.destinationChainId },
        // What the attested message mints: the amount less the fee executed (never more than max fee).
        config: { token, decimals, amount: '$ref:attestation.amount_received' },
      },
    ],
    edges: [
      { from: 'burn', to: 'attestation' },
      { from: 'attestation', to: 'mint' },
      { from: 'mint', to: 'arrived' },
    ],
    intent_schema: tokenIntentSchema(token, decimals, { destination: true }),
  };
}
// --- end CCTP lane ---
// --- Hyperliquid lane ---
/**
 * `hyperliquid_topup`: deposit USDC from the hot wallet to Hyperliquid through Bridge2 (a transfer
 * to the bridge address on the chain standing for Arbitrum, credited to the sending address), then
 * wait until the info API shows the credit. Hyperliquid never credits less than 5 USDC: the intent
 * refuses it at creation, and the executor before signing (docs/hyperliquid-lane.md).
 */
export function hyperliquidTopupTemplate(opts: { signerKey: string; chainId: number }): Record<string, unknown> {
  const intent = tokenIntentSchema('USDC', 6, { destination: false });
  (intent.fields as { amount: { min: string } }).amount.min = '5';
  return {
    template_key: 'hyperliquid_topup',
    description: 'Hyperliquid: a USDC deposit through Bridge2 from the hot wallet, then its credit on Hyperliquid.',
    nodes: [
      {
        node_key: 'topup',
        node_kind: 'action',
        action_type: 'hyperliquid_topup',
        executor_binding: 'exec.hyperliquid.topup',
        signer_binding: { signer_key: opts.signerKey, chain_id: opts.chainId },
        config: {},
      },
      {
        node_key: 'credit',
        node_kind: 'observe',
        action_type: 'hyperliquid_credit',
        executor_binding: 'exec.observe.hyperliquid_credit',
        config: { user: '$ref:topup.hyperliquid_user', amount: '$ref:topup.amount', baseline_withdrawable: '$ref:topup.baseline_withdrawable' },
      },
    ],
    edges: [{ from: 'topup', to: 'credit' }],
    intent_schema: intent,
  };
}
// --- end Hyperliquid lane ---
// --- USDT0 lane ---
/**
 * `usdt0_send`: USDT0 from the hot wallet on one chain to intent.destination.address on another,
 * through LayerZero OFT v2 (quoteSend, then send with exactly the quoted native fee, at most
 * `maxNativeFeeWei`), then wait until the destination OFT emits OFTReceived with the send's GUID
 * (docs/usdt0-lane.md). The whole amount must arrive (min_amount is the amount).
 */
export function usdt0SendTemplate(opts: { templateKey?: string; sourceChainId: number; destinationChainId: number; signerKey: string; maxNativeFeeWei: string; token?: string }): Record<string, unknown> {
  const token = opts.token ?? 'USDT0';
  return {
    template_key: opts.templateKey ?? 'usdt0_send',
    description: 'USDT0: an OFT send on the source chain, then its credit on the destination chain, found by the GUID.',
    nodes: [
      {
        node_key: 'send',
        node_kind: 'action',
        action_type: 'usdt0_send',
        executor_binding: 'exec.usdt0.send',
        signer_binding: { signer_key: opts.signerKey, chain_id: opts.sourceChainId },
        config: { token, destination_chain_id: opts.destinationChainId, max_native_fee_wei: opts.maxNativeFeeWei },
      },
      {
        node_key: 'credit',
        node_kind: 'observe',
        action_type: 'usdt0_credit',
        executor_binding: 'exec.observe.usdt0_credit',
        config: {},
      },
    ],
    edges: [{ from: 'send', to: 'credit' }],
    intent_schema: tokenIntentSchema(token, 6, { destination: true }),
  };
}
// --- end USDT0 lane ---
// --- CCIP lane ---
/**
 * `ccip_send`: a token from the hot wallet on one chain to intent.destination.address on another,
 * through Chainlink CCIP (getFee, then ccipSend with exactly the quoted fee in native coin, at most
 * `maxFeeWei`, re-quoted right before the broadcast), then wait until the destination OffRamp shows
 * the message executed (docs/ccip-lane.md). No data and gas limit 0: tokens only, no receiver call.
 */
export function ccipSendTemplate(opts: {
  templateKey?: string;
  sourceChainId: number;
  destinationChainId: number;
  signerKey: string;
  /** The fee cap in the fee token's base units (wei of native coin; juels of LINK with feeToken). */
  maxFeeWei: string;
  token?: string;
  decimals?: number;
  /** Pay the fee in this token of ccip.fee_tokens (LINK): a fee approval node first allows the Router `approve` (token units, the cap). */
  feeToken?: { symbol: string; approve: string };
}): Record<string, unknown> {
  const token = opts.token ?? 'USDC';
  const approval = opts.feeToken
    ? [
        {
          node_key: 'fee_approval',
          node_kind: 'action',
          action_type: 'ccip_fee_approval',
          executor_binding: 'exec.ccip.fee_approval',
          signer_binding: { signer_key: opts.signerKey, chain_id: opts.sourceChainId },
          config: { token_approval: { token: opts.feeToken.symbol, spender: 'ccip.router', amount: opts.feeToken.approve } },
        },
      ]
    : [];
  return {
    template_key: opts.templateKey ?? 'ccip_send',
    description: opts.feeToken
      ? `CCIP: the Router allowed the fee cap in ${opts.feeToken.symbol}, a ccipSend paying its fee in it on the source chain, then its execution on the destination chain, found by the messageId.`
      : 'CCIP: a ccipSend on the source chain, then its execution on the destination chain, found by the messageId.',
    nodes: [
      ...approval,
      {
        node_key: 'send',
        node_kind: 'action',
        action_type: 'ccip_send',
        executor_binding: 'exec.ccip.send',
        signer_binding: { signer_key: opts.signerKey, chain_id: opts.sourceChainId },
        config: { token, destination_chain_id: opts.destinationChainId, max_fee_wei: opts.maxFeeWei, ...(opts.feeToken ? { fee_token: opts.feeToken.symbol } : {}) },
      },
      {
        node_key: 'delivery',
        node_kind: 'observe',
        action_type: 'ccip_delivery',
        executor_binding: 'exec.observe.ccip_delivery',
        config: {},
      },
    ],
    edges: [...(opts.feeToken ? [{ from: 'fee_approval', to: 'send' }] : []), { from: 'send', to: 'delivery' }],
    intent_schema: tokenIntentSchema(token, opts.decimals ?? 6, { destination: true }),
  };
}
// --- end CCIP lane ---
// --- Gateway lane (docs/gateway-lane.md) ---
/**
 * `gateway_transfer`: approve the GatewayWallet and deposit `intent.amount` plus `maxFee` (the fee
 * reserve: Gateway takes its fee from the balance on top of the value) on the source chain,
 * wait until Gateway counts the deposit in the unified balance, sign a burn intent (EIP-712) for
 * the same amount to `intent.destination` on the destination chain (at most `maxFee` on top, in
 * token units), mint it there with Gateway's attestation, and watch the burn on the source.
 */
export function gatewayTransferTemplate(opts: { templateKey?: string; sourceChainId: number; destinationChainId: number; signerKey: string; maxFee: string; token?: string; decimals?: number }): Record<string, unknown> {
  const token = opts.token ?? 'USDC';
  const source = { signer_key: opts.signerKey, chain_id: opts.sourceChainId };
  return {
    template_key: opts.templateKey ?? 'gateway_transfer',
    description: 'Circle Gateway: approve and deposit on the source chain, a signed burn intent attested by Gateway, gatewayMint on the destination chain.',
    nodes: [
      { node_key: 'approve', node_kind: 'action', action_type: 'gateway_approve', executor_binding: 'exec.gateway.approve', signer_binding: source, config: { fee_reserve: opts.maxFee } },
      { node_key: 'deposit', node_kind: 'action', action_type: 'gateway_deposit', executor_binding: 'exec.gateway.deposit', signer_binding: source, config: { fee_reserve: opts.maxFee } },
      { node_key: 'credit', node_kind: 'observe', action_type: 'gateway_deposit_credit', executor_binding: 'exec.observe.gateway_deposit', config: {} },
      {
        node_key: 'intent',
        node_kind: 'action',
        action_type: 'gateway_burn_intent',
        executor_binding: 'exec.gateway.intent',
        signer_binding: source,
        config: { destination_chain_id: opts.destinationChainId, max_fee: opts.maxFee },
      },
      { node_key: 'mint', node_kind: 'action', action_type: 'gateway_mint', executor_binding: 'exec.gateway.mint', signer_binding: { signer_key: opts.signerKey, chain_id: opts.destinationChainId }, config: {} },
      { node_key: 'burn', node_kind: 'observe', action_type: 'gateway_burn', executor_binding: 'exec.observe.gateway_burn', config: {} },
    ],
    edges: [
      { from: 'approve', to: 'deposit' },
      { from: 'deposit', to: 'credit' },
      { from: 'credit', to: 'intent' },
      { from: 'intent', to: 'mint' },
      { from: 'intent', to: 'burn' },
    ],
    intent_schema: tokenIntentSchema(token, opts.decimals ?? 6, { destination: true }),
  };
}
// --- end Gateway lane ---
export const CEX_TO_CHAIN_TEMPLATE_KEY = 'cex_to_chain';

export interface CexToChainTemplateOptions {
  chainId: number;
  /** The exchange account (cex.accounts[].key) the withdrawal is made from. */
  account: string;
  /** Ferry's network name the exchange pays on (mapped through the account's `networks`). */
  network: string;
  /** The token, as listed in evm.tokens, and its decimals. */
  token: string;
  decimals: number;
  /** The receiving wallet: the address the exchange pays, and the signer that sweeps from it. */
  receiving: { address: string; signerKey: string };
  /** Where the sweep sends the funds. */
  treasury: string;
  /** Blocks the deposit must be deep before it counts, and the sweep before it is done. */
  confirmations: number;
}

/**
 * `cex_to_chain`: withdraw `intent.amount` of `intent.asset` from an exchange account to Ferry's
 * receiving wallet, follow the withdrawal until the exchange reports it paid, wait until the
 * deposit is on chain at the receiving wallet (`confirmations` deep), then sweep that amount to
 * the treasury with an ERC-20 transfer signed by the receiving wallet's signer.
 */
export function cexToChainTemplate(opts: CexToChainTemplateOptions): Record<string, unknown> {
  return {
    template_key: CEX_TO_CHAIN_TEMPLATE_KEY,
    description: 'Withdraw from the exchange to the receiving wallet, watch it arrive on chain, sweep it to the treasury.',
    nodes: [
      {
        node_key: 'withdraw',
        node_kind: 'action',
        action_type: 'cex_withdrawal',
        executor_binding: { executor_key: CEX_WITHDRAWAL_ACTION_KEY, account: opts.account },
        config: { coin: opts.token, network: opts.network, address: opts.receiving.address },
      },
      {
        node_key: 'withdrawal_observe',
        node_kind: 'observe',
        action_type: 'cex_withdrawal_status',
        executor_binding: { executor_key: CEX_WITHDRAWAL_OBSERVE_KEY, account: opts.account },
        config: {},
      },
      {
        node_key: 'deposit_observe',
        node_kind: 'observe',
        action_type: 'chain_balance',
        executor_binding: { executor_key: EVM_BALANCE_OBSERVE_KEY, chain_id: opts.chainId },
        config: { address: opts.receiving.address, token: opts.token, decimals: opts.decimals, mode: 'holds', confirmations: opts.confirmations },
      },
      {
        node_key: 'sweep',
        node_kind: 'action',
        action_type: 'erc20_transfer',
        executor_binding: EVM_ERC20_TRANSFER_KEY,
        signer_binding: { signer_key: opts.receiving.signerKey, chain_id: opts.chainId },
        config: { token: opts.token, decimals: opts.decimals, to: opts.treasury, confirmations: opts.confirmations },
      },
    ],
    edges: [
      { from: 'withdraw', to: 'withdrawal_observe' },
      { from: 'withdrawal_observe', to: 'deposit_observe' },
      { from: 'deposit_observe', to: 'sweep' },
    ],
    intent_schema: tokenIntentSchema(opts.token, opts.decimals, { destination: false }),
  };
}
