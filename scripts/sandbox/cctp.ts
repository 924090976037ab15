import { createPublicClient, http, maxUint256, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { startAttestationEmulator, type AttestationEmulator } from '../../test/emulators/attestation.ts';
import { deployCctp, linkCctp } from '../../test/helpers/cctp.ts';
import { compileContracts, sendCall } from '../../test/helpers/contracts.ts';
import type { SandboxChain, SandboxComponent, SandboxContext } from './component.ts';

export interface SandboxCctpOptions {
  source: () => SandboxChain;
  destination: () => SandboxChain;
  sourceDomain: number;
  destinationDomain: number;
  /** Deploys the contracts on both chains (a funded development account). */
  deployerKey: Hex;
  /** The attestation emulator signs with it; both transmitters trust its address. */
  attesterKey: Hex;
  /** The hot wallet: it burns on the source (approving the messenger once here) and mints on the destination. */
  hotWallet: { signerKey: string; key: Hex };
  /** The source chain's token symbol (deployed by the stablecoin component). */
  symbol: string;
  /** Blocks the emulator waits for before attesting. */
  confirmations: number;
}

/**
 * CCTP v2 between two sandbox chains: the test TokenMessengerV2 and MessageTransmitterV2
 * (test/contracts/Cctp.sol) on both, linked both ways, the destination's own test USDC, the hot
 * wallet's standing allowance to the source messenger, and the attestation emulator
 * (test/emulators/attestation.ts) reading the source chain. Adds the chains' `cctp` entries, the
 * destination token, the hot wallet's destination chain and `cctp.attestation_url` to Ferry's
 * configuration.
 */
export function sandboxCctp(opts: SandboxCctpOptions): SandboxComponent {
  let iris: AttestationEmulator | undefined;
  return {
    name: 'cctp (contracts on both chains, attestation emulator)',
    async start(ctx: SandboxContext) {
      const src = opts.source();
      const dst = opts.destination();
      const srcClient = createPublicClient({ transport: http(src.rpcUrl, { retryCount: 0 }) });
      const dstClient = createPublicClient({ transport: http(dst.rpcUrl, { retryCount: 0 }) });
      const listed = ctx.config.tokens.find((t) => t.chain_id === src.chainId && t.symbol === opts.symbol);
      if (!listed) throw new Error(`no ${opts.symbol} token on chain ${src.chainId}: start the stablecoin first`);
      const sourceToken = { address: listed.address as Address, abi: compileContracts().TestToken!.abi, decimals: Number(listed.decimals ?? 6) };
      const attester = privateKeyToAccount(opts.attesterKey).address;
      const a = await deployCctp(srcClient, src.rpcUrl, opts.deployerKey, { domain: opts.sourceDomain, attester, token: sourceToken });
      const b = await deployCctp(dstClient, dst.rpcUrl, opts.deployerKey, { domain: opts.destinationDomain, attester });
      await linkCctp(a, b, opts.deployerKey);
      await sendCall(srcClient, src.rpcUrl, opts.hotWallet.key, sourceToken, 'approve', [a.messenger.address, maxUint256]);
      for (const d of [a, b]) {
        const entry = ctx.config.chains.find((c) => c.chain_id === d.chainId);
        if (!entry) throw new Error(`chain ${d.chainId} is not configured`);
        entry.cctp = { domain: d.domain, token_messenger: d.messenger.address, message_transmitter: d.transmitter.address };
      }
      ctx.config.tokens.push({ chain_id: dst.chainId, symbol: opts.symbol, address: b.token.address, decimals: b.token.decimals });
      const signer = ctx.config.signers.find((s) => s.key === opts.hotWallet.signerKey);
      if (!signer) throw new Error(`signer ${opts.hotWallet.signerKey} is not configured`);
      signer.chains = [...new Set([...(signer.chains as number[]), dst.chainId])];
      iris = await startAttestationEmulator({
        sources: [a, b].map((d) => ({ domain: d.domain, chain: d.chain, transmitter: d.transmitter.address })),
        attesterKey: opts.attesterKey,
        confirmations: opts.confirmations,
      });
      ctx.sections.cctp = { attestation_url: iris.url, poll_seconds: 1 };
      ctx.facts.cctp = {
        attestation_url: iris.url,
        source: { chain_id: a.chainId, domain: a.domain, token_messenger: a.messenger.address, message_transmitter: a.transmitter.address },
        destination: { chain_id: b.chainId, domain: b.domain, token_messenger: b.messenger.address, message_transmitter: b.transmitter.address, token: b.token.address },
      };
    },
    async stop() {
      await iris?.stop();
    },
  };
}
