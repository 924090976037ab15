import type { ConfigFile } from '../../config-file.ts';
import type { Logger } from '../../log.ts';
import { feeBumpOfChain, type EvmLane } from '../evm/index.ts';
import type { EvmNonceManager } from '../evm/nonces.ts';
import { EvmChainRouter, type EvmRouterOptions } from '../evm/router.ts';
import { failed } from '../evm/tx-lifecycle.ts';
import type { ExecutionContext, ExecutionResult } from '../protocol.ts';
import type { ExecutorRegistry } from '../registry.ts';
import { checkBurnCallerAlignment } from './alignment.ts';
import { CctpAttestationObserver, IrisClient } from './attestation.ts';
import { CctpBurnExecutor, destinationDomainOf } from './burn.ts';
import { CCTP_BURN_KEY, CCTP_LANE, CCTP_MINT_KEY } from './common.ts';
import { CctpMintExecutor } from './mint.ts';

export { CCTP_ATTESTATION_KEY, CCTP_BURN_KEY, CCTP_LANE, CCTP_MINT_KEY } from './common.ts';
export { CctpAttestationObserver, IrisClient } from './attestation.ts';
export { CctpBurnExecutor } from './burn.ts';
export { CctpMintExecutor } from './mint.ts';
export { checkBurnCallerAlignment } from './alignment.ts';
export { decodeMessage, encodeDepositForBurn, messageTransmitterAbi, tokenMessengerAbi } from './message.ts';

/** The burn's registry entry: the EVM router, plus the caller-alignment check against the approved plan. */
class CctpBurnRouter extends EvmChainRouter {
  readonly #lane: EvmLane;
  readonly #iris: IrisClient | null;

  constructor(opts: EvmRouterOptions, lane: EvmLane, iris: IrisClient | null) {
    super(opts);
    this.#lane = lane;
    this.#iris = iris;
  }

  override async close(): Promise<void> {
    await super.close();
    await this.#iris?.close();
  }

  async checkPlan(ctx: ExecutionContext, plan: unknown): Promise<ExecutionResult | null> {
    const destination = destinationDomainOf(ctx.node_config, this.#lane.chains);
    if (!destination.ok) return failed(destination.code, destination.detail);
    return checkBurnCallerAlignment({ plan, nodeKey: ctx.node_key, destinationDomain: destination.value, wallets: this.#lane.wallets, chains: this.#lane.chains });
  }
}

/**
 * The CCTP lane on top of the EVM lane's chains and wallets: `exec.cctp.burn` and `exec.cctp.mint`
 * (one executor per chain and wallet, as the EVM transfer executors), and, when `cctp.attestation_url`
 * is configured, `exec.observe.cctp_attestation`. Registers nothing when no chain has a `cctp`
 * entry. Makes no call.
 */
export function registerCctpLane(
  file: ConfigFile,
  evm: EvmLane | null,
  registry: ExecutorRegistry,
  deps: { log: Logger; nonces?: EvmNonceManager | null },
): { executorKeys: string[] } | null {
  if (!evm || !evm.chains.all().some((c) => c.config.cctp)) return null;
  const nonces = deps.nonces ?? null;
  const tokens = file.evm.tokens;
  const chains = evm.chains;
  // The burns' own client of the attestation service, for fast-transfer fee quotes.
  const iris = file.cctp ? new IrisClient(file.cctp) : null;
  const burn = new CctpBurnRouter(
    {
      executorKey: CCTP_BURN_KEY,
      lane: CCTP_LANE,
      chains,
      wallets: evm.wallets,
      make: (chain, from) => new CctpBurnExecutor({ chain, chains, from: from!, tokens, nonces, feeBump: { ...feeBumpOfChain(chain.config), limits: evm.replacements }, iris }),
    },
    evm,
    iris,
  );
  const mint = new EvmChainRouter({
    executorKey: CCTP_MINT_KEY,
    lane: CCTP_LANE,
    chains,
    wallets: evm.wallets,
    make: (chain, from) => new CctpMintExecutor({ chain, from: from!, nonces, feeBump: { ...feeBumpOfChain(chain.config), limits: evm.replacements } }),
  });
  const executors = [burn, mint, ...(file.cctp ? [new CctpAttestationObserver(file.cctp, chains)] : [])];
  for (const e of executors) registry.register(e);
  if (!file.cctp) deps.log.warn('cctp: no cctp.attestation_url is configured; exec.observe.cctp_attestation is not registered');
  deps.log.info({ executors: executors.map((e) => e.executorKey) }, 'cctp lane configured');
  return { executorKeys: executors.map((e) => e.executorKey) };
}
