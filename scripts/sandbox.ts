/**
 * `npm run sandbox`: a local world to watch a real on-chain transfer in /ui. It starts a local
 * chain (anvil), deploys the test stablecoin (USDC, 6 decimals), funds a hot wallet with it,
 * starts Ferry configured for that chain and wallet, installs the `usdc.transfer` template, and
 * prints the two commands that create and approve a transfer. It also starts the exchange
 * emulator (test/emulators/binance.ts) paying USDC from its own hot wallet on the chain, installs
 * `cex_to_chain` (withdraw -> withdrawal observe -> deposit on chain -> sweep to the treasury) and
 * prints one command that creates, approves and watches such a movement. Ctrl-C stops everything.
 *
 * `usdc.reviewed_transfer` puts a manual gate before the transfer (its printed commands create,
 * approve, and confirm the gate as a third principal) and reports to a callback receiver registered
 * with node events, which logs every node's change. A deposit no movement made is sent to the
 * exchange, and cex_transfer_ingest records it; the command that lists it is printed too.
 *
 * A second chain (31338) with the CCTP v2 test contracts on both and the attestation emulator
 * make the `cctp_bridge` template runnable too; its two commands are printed after the transfer's.
 * The Hyperliquid info API emulator, crediting deposits to a bridge address on the local chain,
 * makes `hyperliquid_topup` runnable; its two commands are printed too. The LayerZero OFT v2 test
 * contracts on the local and the remote chain, with the relayer emulator, make `usdt0_send` runnable.
 * The Gateway test contracts on both chains, with the Gateway API emulator, make `gateway_transfer` runnable.
 * The CCIP 1.6 test contracts on both chains, with the emulated execution, make `ccip_send` runnable,
 * and `ccip_send_link`, the same send paying its fee in LINK after a fee approval node.
 *
 * The treasury policy: an address book entry for a cold address, a rule set, and one standing order
 * (an hourly sweep of the hot wallet's USDC above 900000 to the cold address), each proposed and
 * approved through the API (scripts/sandbox/policy.ts), to watch in /ui's Standing orders.
 *
 * Settings: FERRY_DATA_DIR (default ./.ferry/sandbox), PORT (Ferry, default 3000),
 * SANDBOX_ANVIL_PORT and SANDBOX_REMOTE_ANVIL_PORT (default: free ports), DATABASE_URL (default: embedded PostgreSQL in the
 * data folder). The keys are anvil's public development keys: nothing here is a secret.
 */
import { resolve } from 'node:path';
import { localChain } from './sandbox/chain.ts';
import { Sandbox, type SandboxComponent, type SandboxContext } from './sandbox/component.ts';
import { exchangeEmulator } from './sandbox/exchange.ts';
import { ferryServer } from './sandbox/ferry.ts';
import { stablecoin } from './sandbox/stablecoin.ts';
import { cctpBridgeTemplate, ccipSendTemplate, gatewayTransferTemplate, hyperliquidTopupTemplate, reviewedTransferTemplate, usdcTransferTemplate, usdt0SendTemplate } from './sandbox/templates.ts';
import { sandboxCcip } from './sandbox/ccip.ts';
import { callbackReceiver } from './sandbox/callback-receiver.ts';
import { sandboxUsdt0 } from './sandbox/usdt0.ts';
import { sandboxHyperliquid } from './sandbox/hyperliquid.ts';
import { sandboxCctp } from './sandbox/cctp.ts';
import { sandboxGateway } from './sandbox/gateway.ts';
import { freshSandboxData } from './sandbox/fresh-data.ts';
import { installSandboxPolicy } from './sandbox/policy.ts';
import { lanes } from '../src/executors/lanes.ts';

const CHAIN_ID = 31337;
/** anvil's development account 0 (deploys and mints) and 1 (the hot wallet); 2 receives. */
const DEPLOYER_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const HOT_WALLET_KEY = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';
const RECIPIENT = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
const SIGNER_KEY = 'sandbox_hot';

// --- CCTP: a second chain, the CCTP test contracts on both, the attestation emulator ---
const REMOTE_CHAIN_ID = 31338;
const CCTP_SOURCE_DOMAIN = 0;
const CCTP_REMOTE_DOMAIN = 6;
/** anvil's development account 3: the sandbox attester (public, like every key here). */
const ATTESTER_KEY = '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6';

/** The second chain, shared by the lanes that cross chains (CCTP, USDT0): started by the first part that needs it. */
let remoteChain: ReturnType<typeof localChain> | null = null;
function remote(): { chain: ReturnType<typeof localChain>; components: SandboxComponent[] } {
  if (remoteChain) return { chain: remoteChain, components: [] };
  remoteChain = localChain({ chainId: REMOTE_CHAIN_ID, name: 'remote', port: process.env.SANDBOX_REMOTE_ANVIL_PORT ? Number(process.env.SANDBOX_REMOTE_ANVIL_PORT) : undefined });
  return { chain: remoteChain, components: [remoteChain] };
}

function cctpComponents(local: ReturnType<typeof localChain>, ctx: SandboxContext) {
  const shared = remote();
  const remoteChainOfCctp = shared.chain;
  ctx.templates.push(cctpBridgeTemplate({ sourceChainId: CHAIN_ID, destinationChainId: REMOTE_CHAIN_ID, signerKey: SIGNER_KEY }));
  const cctp = sandboxCctp({
    source: local.chain,
    destination: remoteChainOfCctp.chain,
    sourceDomain: CCTP_SOURCE_DOMAIN,
    destinationDomain: CCTP_REMOTE_DOMAIN,
    deployerKey: DEPLOYER_KEY,
    attesterKey: ATTESTER_KEY,
    hotWallet: { signerKey: SIGNER_KEY, key: HOT_WALLET_KEY },
    symbol: 'USDC',
    confirmations: 2,
  });
  return { remote: shared.components, cctp };
}

function cctpCommands(url: string, tokens: Record<'requester' | 'approver', string>): string[] {
  const intent = JSON.stringify({ asset: 'USDC', amount: '10', destination: { address: RECIPIENT } });
  return [
    `FERRY_TOKEN=${tokens.requester} npm run ferry -- movements create --url ${url} --template cctp_bridge --intent '${intent}'`,
    `FERRY_TOKEN=${tokens.approver} npm run ferry -- movements approve --url ${url} <movement id>`,
  ];
}
// --- end CCTP ---
// --- Hyperliquid: Bridge2's Arbitrum One address, with placeholder code here (a deposit runs no bridge code) ---
const HYPERLIQUID_BRIDGE = '0x2df1c51e09aecf9cacb7bc98cb1742757f163df7';

function hyperliquidCommands(url: string, tokens: Record<'requester' | 'approver', string>): string[] {
  const intent = JSON.stringify({ asset: 'USDC', amount: '20' });
  return [
    `FERRY_TOKEN=${tokens.requester} npm run ferry -- movements create --url ${url} --template hyperliquid_topup --intent '${intent}'`,
    `FERRY_TOKEN=${tokens.approver} npm run ferry -- movements approve --url ${url} <movement id>`,
  ];
}
// --- end Hyperliquid ---
// --- USDT0: the OFT test contracts on the local and the remote chain, the LayerZero relayer emulator ---
const USDT0_SOURCE_EID = 30101;
const USDT0_REMOTE_EID = 30110;

function usdt0Commands(url: string, tokens: Record<'requester' | 'approver', string>): string[] {
  const intent = JSON.stringify({ asset: 'USDT0', amount: '15', destination: { address: RECIPIENT } });
  return [
    `FERRY_TOKEN=${tokens.requester} npm run ferry -- movements create --url ${url} --template usdt0_send --intent '${intent}'`,
    `FERRY_TOKEN=${tokens.approver} npm run ferry -- movements approve --url ${url} <movement id>`,
  ];
}
// --- end USDT0 ---
// --- Gateway: a GatewayWallet and GatewayMinter on the local and the remote chain, the Gateway API emulator ---
const GATEWAY_SOURCE_DOMAIN = 0;
const GATEWAY_REMOTE_DOMAIN = 6;

function gatewayCommands(url: string, tokens: Record<'requester' | 'approver', string>): string[] {
  const intent = JSON.stringify({ asset: 'USDC', amount: '30', destination: { address: RECIPIENT } });
  return [
    `FERRY_TOKEN=${tokens.requester} npm run ferry -- movements create --url ${url} --template gateway_transfer --intent '${intent}'`,
    `FERRY_TOKEN=${tokens.approver} npm run ferry -- movements approve --url ${url} <movement id>`,
  ];
}
// --- end Gateway ---
// --- CCIP: the CCIP 1.6 test contracts on the local and the remote chain, the execution emulator ---
/** Chainlink's test token name: locked on the local chain, minted on the remote one. */
const CCIP_TOKEN = { name: 'CCIP BnM', symbol: 'CCIP-BnM', decimals: 18 };
/** Ethereum's and Arbitrum's selectors (chain-selectors), standing for the two sandbox chains. */
const CCIP_SOURCE_SELECTOR = 5009297550715157269n;
const CCIP_REMOTE_SELECTOR = 4949039107694359620n;

function ccipCommands(url: string, tokens: Record<'requester' | 'approver', string>, template = 'ccip_send', amount = '12.5'): string[] {
  const intent = JSON.stringify({ asset: CCIP_TOKEN.symbol, amount, destination: { address: RECIPIENT } });
  return [
    `FERRY_TOKEN=${tokens.requester} npm run ferry -- movements create --url ${url} --template ${template} --intent '${intent}'`,
    `FERRY_TOKEN=${tokens.approver} npm run ferry -- movements approve --url ${url} <movement id>`,
  ];
}
/** The LINK-fee send: its fee approval node approves 1 LINK (the cap, in juels below) to the Router. */
const CCIP_LINK_TEMPLATE = 'ccip_send_link';
const CCIP_LINK_CAP_JUELS = (10n ** 18n).toString();
// --- end CCIP ---
// The exchange (cex_to_chain): anvil's development accounts 3 (the exchange's hot wallet) and 4
// (Ferry's receiving wallet, which sweeps), and a treasury address (account 5). Public keys too.
const EXCHANGE_HOT_KEY = '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6';
const RECEIVING_KEY = '0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a';
const TREASURY = '0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc';

/** The sandbox's callback receiver, a destination with node events (scripts/sandbox/callback-receiver.ts). */
const CALLBACK_DESTINATION = 'sandbox-receiver';

/** Create (naming the receiver), approve, and confirm the gate as a third principal (the admin). */
function reviewedTransferCommands(url: string, tokens: Record<'requester' | 'approver' | 'admin', string>): string[] {
  const intent = JSON.stringify({ asset: 'USDC', amount: '5', destination: { address: RECIPIENT } });
  return [
    `FERRY_TOKEN=${tokens.requester} npm run ferry -- movements create --url ${url} --template usdc.reviewed_transfer --callback-destination ${CALLBACK_DESTINATION} --intent '${intent}'`,
    `FERRY_TOKEN=${tokens.approver} npm run ferry -- movements approve --url ${url} <movement id>`,
    `FERRY_TOKEN=${tokens.admin} npm run ferry -- gates confirm --url ${url} <movement id> --node review --note 'destination checked'`,
  ];
}

function exchange(chain: ReturnType<typeof localChain>) {
  return exchangeEmulator({
    chain: chain.chain,
    symbol: 'USDC',
    decimals: 6,
    deployerKey: DEPLOYER_KEY,
    hotWalletKey: EXCHANGE_HOT_KEY,
    funding: '1000000',
    account: { key: 'sandbox_exchange', apiKey: 'sandbox-exchange-api-key', apiSecret: 'sandbox-exchange-api-secret', keyEnv: 'SANDBOX_EXCHANGE_KEY', secretEnv: 'SANDBOX_EXCHANGE_SECRET' },
    receiving: { signerKey: 'sandbox_receiving', keyEnv: 'SANDBOX_RECEIVING_KEY', key: RECEIVING_KEY },
    treasury: TREASURY,
    confirmations: 3,
    foreignDeposit: '75',
  });
}

/** The one command that creates, approves and watches a cex_to_chain movement of 40 USDC. */
function cexToChainCommand(url: string, tokens: Record<'requester' | 'approver' | 'admin', string>): string {
  const intent = JSON.stringify({ asset: 'USDC', amount: '40' });
  return [
    `id=$(FERRY_TOKEN=${tokens.requester} npm run -s ferry -- movements create --url ${url} --template cex_to_chain --intent '${intent}' | sed -n 's/^Created movement \\([0-9a-f-]*\\).*/\\1/p')`,
    `FERRY_TOKEN=${tokens.approver} npm run -s ferry -- movements approve --yes --url ${url} "$id"`,
    `FERRY_TOKEN=${tokens.admin} npm run -s ferry -- movements watch --url ${url} "$id"`,
  ].join(' && ');
}

/**
 * What the sandbox brings up for each lane of the lane list (src/executors/lanes.ts) that has a
 * sandbox part, and the commands it prints for it. A part is used only when its lane and the lanes
 * it needs are listed; a lane without a part is named as having none.
 */
interface SandboxPart {
  lane: string;
  needs: string[];
  components(chain: ReturnType<typeof localChain>, ctx: SandboxContext): SandboxComponent[];
  /** Lines to print, and the commands' entry in the ready line. */
  describe(url: string, tokens: Record<'requester' | 'approver' | 'admin', string>, ctx: SandboxContext): { lines: string[]; ready: Record<string, unknown> };
}

const sandboxParts: SandboxPart[] = [
  {
    lane: 'evm',
    needs: [],
    components: (chain, ctx) => {
      ctx.templates.push(usdcTransferTemplate({ chainId: CHAIN_ID, signerKey: SIGNER_KEY, confirmations: 3 }));
      ctx.templates.push(reviewedTransferTemplate({ chainId: CHAIN_ID, signerKey: SIGNER_KEY, confirmations: 3 }));
      return [
        callbackReceiver({ name: CALLBACK_DESTINATION }),
        stablecoin({
          chain: chain.chain,
          symbol: 'USDC',
          decimals: 6,
          deployerKey: DEPLOYER_KEY,
          hotWallet: { signerKey: SIGNER_KEY, keyEnv: 'SANDBOX_HOT_WALLET_KEY', key: HOT_WALLET_KEY },
          funding: 1_000_000n * 10n ** 6n,
        }),
      ];
    },
    describe: (url, tokens, ctx) => {
      const intent = JSON.stringify({ asset: 'USDC', amount: '25', destination: { address: RECIPIENT } });
      const commands = [
        `FERRY_TOKEN=${tokens.requester} npm run ferry -- movements create --url ${url} --template usdc.transfer --intent '${intent}'`,
        `FERRY_TOKEN=${tokens.approver} npm run ferry -- movements approve --url ${url} <movement id>`,
      ];
      const gated = reviewedTransferCommands(url, tokens);
      const receiver = ctx.facts.callback_receiver as { log: string };
      return {
        lines: [
          `USDC ${String((ctx.facts.token_USDC as { address: string }).address)}; hot wallet ${String(ctx.facts.hot_wallet)} holds 1000000 USDC.`,
          '',
          'Create a transfer of 25 USDC, then approve it (a second person, by a second token):',
          '',
          ...commands.map((c) => `  ${c}`),
          '',
          `Or a transfer of 5 USDC behind a manual gate: create it, approve it, and a third person confirms the gate "review".`,
          `It reports to the callback destination ${CALLBACK_DESTINATION}, registered with node events: every node's change is in ${receiver.log}.`,
          '',
          ...gated.map((c) => `  ${c}`),
          '',
        ],
        ready: { commands, gate_commands: gated },
      };
    },
  },
  {
    lane: 'cctp',
    needs: ['evm'],
    components: (chain, ctx) => {
      const { remote, cctp } = cctpComponents(chain, ctx);
      return [...remote, cctp];
    },
    describe: (url, tokens) => ({
      lines: [
        `Or bridge 10 USDC from chain ${CHAIN_ID} to chain ${REMOTE_CHAIN_ID} with CCTP (burn, attestation, mint, balance check):`,
        '',
        ...cctpCommands(url, tokens).map((c) => `  ${c}`),
        '',
      ],
      ready: { cctp_commands: cctpCommands(url, tokens) },
    }),
  },
  {
    lane: 'hyperliquid',
    // The deposit is an ERC-20 transfer from the EVM lane's hot wallet, on the local chain standing for Arbitrum.
    needs: ['evm'],
    components: (chain, ctx) => {
      ctx.templates.push(hyperliquidTopupTemplate({ signerKey: SIGNER_KEY, chainId: CHAIN_ID }));
      return [sandboxHyperliquid({ chain: chain.chain, symbol: 'USDC', bridge: HYPERLIQUID_BRIDGE })];
    },
    describe: (url, tokens) => {
      const commands = hyperliquidCommands(url, tokens);
      return {
        lines: [`Or top up the hot wallet's Hyperliquid account with 20 USDC (a deposit to the bridge ${HYPERLIQUID_BRIDGE}, then the credit):`, '', ...commands.map((c) => `  ${c}`), ''],
        ready: { hyperliquid_commands: commands },
      };
    },
  },
  {
    lane: 'usdt0',
    // The send is a contract call from the EVM lane's hot wallet; the credit is read on the remote chain.
    needs: ['evm'],
    components: (chain, ctx) => {
      const shared = remote();
      ctx.templates.push(usdt0SendTemplate({ sourceChainId: CHAIN_ID, destinationChainId: REMOTE_CHAIN_ID, signerKey: SIGNER_KEY, maxNativeFeeWei: '1000000000000000' }));
      return [
        ...shared.components,
        sandboxUsdt0({
          source: chain.chain,
          destination: shared.chain.chain,
          sourceEid: USDT0_SOURCE_EID,
          destinationEid: USDT0_REMOTE_EID,
          deployerKey: DEPLOYER_KEY,
          hotWallet: { signerKey: SIGNER_KEY, key: HOT_WALLET_KEY },
          funding: 1_000_000n * 10n ** 6n,
        }),
      ];
    },
    describe: (url, tokens) => {
      const commands = usdt0Commands(url, tokens);
      return {
        lines: [`Or send 15 USDT0 from chain ${CHAIN_ID} to chain ${REMOTE_CHAIN_ID} through LayerZero OFT v2 (quoteSend, send, the credit by its GUID; the fee at most 0.001 ETH):`, '', ...commands.map((c) => `  ${c}`), ''],
        ready: { usdt0_commands: commands },
      };
    },
  },
  {
    lane: 'gateway',
    // Deposit, burn intent and mint are the EVM lane's hot wallet's; the mint is on the remote chain.
    needs: ['evm'],
    components: (chain, ctx) => {
      const shared = remote();
      ctx.templates.push(gatewayTransferTemplate({ sourceChainId: CHAIN_ID, destinationChainId: REMOTE_CHAIN_ID, signerKey: SIGNER_KEY, maxFee: '0.5' }));
      return [
        ...shared.components,
        sandboxGateway({
          source: chain.chain,
          destination: shared.chain.chain,
          sourceDomain: GATEWAY_SOURCE_DOMAIN,
          destinationDomain: GATEWAY_REMOTE_DOMAIN,
          deployerKey: DEPLOYER_KEY,
          hotWallet: { signerKey: SIGNER_KEY },
          symbol: 'USDC',
          baseFee: 10_000n,
        }),
      ];
    },
    describe: (url, tokens) => {
      const commands = gatewayCommands(url, tokens);
      return {
        lines: [`Or move 30 USDC from chain ${CHAIN_ID} to chain ${REMOTE_CHAIN_ID} with Circle Gateway (approve, deposit, an EIP-712 burn intent, the attestation, gatewayMint; at most 0.5 USDC of fee):`, '', ...commands.map((c) => `  ${c}`), ''],
        ready: { gateway_commands: commands },
      };
    },
  },
  {
    lane: 'ccip',
    // The send is a contract call from the EVM lane's hot wallet; the execution is read on the remote chain.
    needs: ['evm'],
    components: (chain, ctx) => {
      const shared = remote();
      ctx.templates.push(ccipSendTemplate({ sourceChainId: CHAIN_ID, destinationChainId: REMOTE_CHAIN_ID, signerKey: SIGNER_KEY, maxFeeWei: '1000000000000000', token: CCIP_TOKEN.symbol, decimals: CCIP_TOKEN.decimals }));
      ctx.templates.push(
        ccipSendTemplate({
          templateKey: CCIP_LINK_TEMPLATE,
          sourceChainId: CHAIN_ID,
          destinationChainId: REMOTE_CHAIN_ID,
          signerKey: SIGNER_KEY,
          maxFeeWei: CCIP_LINK_CAP_JUELS,
          token: CCIP_TOKEN.symbol,
          decimals: CCIP_TOKEN.decimals,
          feeToken: { symbol: 'LINK', approve: '1' },
        }),
      );
      return [
        ...shared.components,
        sandboxCcip({
          source: chain.chain,
          destination: shared.chain.chain,
          sourceSelector: CCIP_SOURCE_SELECTOR,
          destinationSelector: CCIP_REMOTE_SELECTOR,
          deployerKey: DEPLOYER_KEY,
          hotWallet: { signerKey: SIGNER_KEY, key: HOT_WALLET_KEY },
          token: CCIP_TOKEN,
          funding: 1_000_000n * 10n ** 18n,
          linkFunding: 100n * 10n ** 18n,
        }),
      ];
    },
    describe: (url, tokens) => {
      const commands = ccipCommands(url, tokens);
      const link = ccipCommands(url, tokens, CCIP_LINK_TEMPLATE, '4');
      return {
        lines: [
          `Or send 12.5 ${CCIP_TOKEN.symbol} from chain ${CHAIN_ID} to chain ${REMOTE_CHAIN_ID} through Chainlink CCIP (getFee and ccipSend on the Router, the execution found by its messageId; the fee at most 0.001 ETH):`,
          '',
          ...commands.map((c) => `  ${c}`),
          '',
          `Or send 4 ${CCIP_TOKEN.symbol} the same way paying the fee in LINK (exec.ccip.fee_approval approves 1 LINK, the cap, to the Router; the Router pulls the quoted LINK, no native value):`,
          '',
          ...link.map((c) => `  ${c}`),
          '',
        ],
        ready: { ccip_commands: commands, ccip_link_commands: link },
      };
    },
  },
  {
    lane: 'cex',
    // The withdrawal lands in a wallet the EVM lane sweeps.
    needs: ['evm'],
    components: (chain) => [exchange(chain)],
    describe: (url, tokens, ctx) => {
      const foreign = ctx.facts.foreign_deposit as { amount: string; tx_id: string };
      const ingest = `FERRY_TOKEN=${tokens.admin} npm run ferry -- cex-transfers list --url ${url} --venue sandbox_exchange`;
      return {
        lines: [
          `The exchange emulator (${String((ctx.facts.exchange as { url: string }).url)}) holds 1000000 USDC for account sandbox_exchange.`,
          `cex_to_chain withdraws to the receiving wallet ${String(ctx.facts.receiving_wallet)}, waits for it on chain and sweeps it to the treasury ${String(ctx.facts.treasury)}:`,
          '',
          `  ${cexToChainCommand(url, tokens)}`,
          '',
          `A deposit of ${foreign.amount} USDC that no movement made (${foreign.tx_id}) reached the account: cex_transfer_ingest records it`,
          'within a few seconds and raises attention (Attention in /ui). List the transfers Ferry did not start:',
          '',
          `  ${ingest}`,
          '',
        ],
        ready: { cex_to_chain_command: cexToChainCommand(url, tokens), cex_transfers_command: ingest },
      };
    },
  },
];

async function main(): Promise<void> {
  const ctx: SandboxContext = {
    dataDir: resolve(process.env.FERRY_DATA_DIR ?? '.ferry/sandbox'),
    chains: [],
    config: { chains: [], signers: [], tokens: [] },
    sections: {},
    // The policy's changes are live once approved (no cool-down), and the balances the standing order reads are snapshotted.
    ferryEnv: { FERRY_POLICY_COOLDOWN_SECONDS: '0', FERRY_BALANCE_SNAPSHOT_ENABLED: 'true' },
    templates: [],
    facts: {},
    log: (line) => console.log(`sandbox: ${line}`),
  };
  const listed = new Set(lanes.map((l) => l.name));
  const parts = sandboxParts.filter((p) => listed.has(p.lane) && p.needs.every((n) => listed.has(n)));
  for (const lane of lanes) if (!sandboxParts.some((p) => p.lane === lane.name)) ctx.log(`the ${lane.name} lane has no sandbox part: nothing here runs its movements`);
  const chain = localChain({ chainId: CHAIN_ID, name: 'local', port: process.env.SANDBOX_ANVIL_PORT ? Number(process.env.SANDBOX_ANVIL_PORT) : undefined });
  const ferry = ferryServer({ port: process.env.PORT ?? '3000' });
  const sandbox = new Sandbox(ctx, [chain, ...parts.flatMap((p) => p.components(chain, ctx)), ferry]);

  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    await sandbox.stop();
    process.exit(code);
  };
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));
  process.on('SIGHUP', () => void stop(0));

  try {
    // New chains every run: with an embedded database, a new Ferry too (see freshSandboxData).
    if (!process.env.DATABASE_URL && (await freshSandboxData(ctx.dataDir)) === 'reset') {
      ctx.log(`fresh chains: emptied ${ctx.dataDir}, which held the last run's data`);
    }
    await sandbox.start();
  } catch (err) {
    console.error((err as Error).message);
    return stop(1);
  }
  const url = ferry.url();
  const tokens = ferry.tokens();
  const described = parts.map((p) => p.describe(url, tokens, ctx));
  if (parts.some((p) => p.lane === 'evm')) {
    try {
      const policy = await installSandboxPolicy(url, tokens, {
        chainId: CHAIN_ID,
        hotWallet: String(ctx.facts.hot_wallet),
        usdc: (ctx.facts.token_USDC as { address: string }).address,
      });
      described.push({ lines: policy.lines, ready: { standing_order_id: policy.standing_order_id, cold: policy.cold } });
    } catch (err) {
      console.error((err as Error).message);
      return stop(1);
    }
  }
  console.log(
    [
      '',
      `Ferry runs on ${url} with chain ${CHAIN_ID} at ${String((ctx.facts.chain_local as { rpc_url: string }).rpc_url)}.`,
      ...described.flatMap((d) => d.lines),
      `Watch it in ${url}/ui with the admin token ${tokens.admin}`,
      `Ferry's log: ${String(ctx.facts.ferry_log)}. Ctrl-C stops the sandbox.`,
      '',
    ].join('\n'),
  );
  // For scripts and tests: the same facts, one JSON line.
  console.log(JSON.stringify({ sandbox: 'ready', url, lanes: parts.map((p) => p.lane), ...Object.assign({}, ...described.map((d) => d.ready)), tokens, recipient: RECIPIENT, ...ctx.facts }));
}

void main();
