import type { EvmLaneState } from '../evm/lane.ts';
import type { LaneDefinition } from '../lane.ts';
import { ccipRegistryBaselines } from './baselines.ts';
import { CCIP_DELIVERY_KEY } from './common.ts';
import { ccipVariables, CcipSectionSchema, refineCcip, type CcipConfig } from './config.ts';

/** The CCIP lane (docs/ccip-lane.md): Chainlink CCIP token sends through the Router, the delivery read from the destination OffRamp by messageId. */
export const ccipLane: LaneDefinition<typeof ccipVariables, { ccip: typeof CcipSectionSchema }> = {
  name: 'ccip',
  summary: 'Tokens across chains with Chainlink CCIP: getFee and ccipSend on the source Router, the execution state read on the destination OffRamp by messageId',
  docs: 'docs/ccip-lane.md',
  requires: ['evm'],
  env: ccipVariables,
  fileSections: { ccip: CcipSectionSchema },
  refineFile: refineCcip,
  executorKeys: ['exec.ccip.send', 'exec.ccip.fee_approval', 'exec.observe.ccip_delivery'],
  signerKeys: [],
  observeIntervals: [{ executorKey: 'exec.observe.ccip_delivery', defaultSeconds: 5, setBy: 'ccip.poll_seconds' }],
  async register(ctx) {
    const { registerCcipLane } = await import('./index.ts');
    const evm = (ctx.lanes.evm ?? null) as EvmLaneState | null;
    return registerCcipLane(ctx.config.file, evm?.lane ?? null, ctx.executors, { log: ctx.log, nonces: evm?.nonces ?? null });
  },
  sweeps: [
    {
      // Seed 000's ccip_drift: the lane's own baselines (also read by verify_drift every 6 h), on a cadence of their own.
      name: 'ccip_drift',
      summary: "reads the CCIP Routers' lanes (isChainSupported) and the token pools (TokenAdminRegistry.getPool, getToken, isSupportedChain) and records drift from the ccip section",
      variables: { enabled: 'FERRY_CCIP_DRIFT_ENABLED', interval: 'FERRY_CCIP_DRIFT_INTERVAL_SECONDS', budget: 'FERRY_CCIP_DRIFT_TIMEOUT_MS' },
      async run(deps, s) {
        if (!(deps.config.file as { ccip?: CcipConfig }).ccip) return { items: 0, budget_exhausted: false, skipped: 'no ccip section' };
        const { runVerifyDrift } = await import('../../sweeps/verify-drift.ts');
        const r = await runVerifyDrift(
          { pool: deps.pool, config: deps.config, log: deps.log, lanes: [ccipLane], worker: 'ccip_drift', onlyListedLanes: true },
          { concurrency: deps.config.verifyDriftRpcConcurrency, laneTimeoutMs: s.maxRunMs },
        );
        return { items: r.checked, budget_exhausted: false, ...r };
      },
    },
  ],
  coreWorkers: [
    {
      // Seed 000: the stranded-send reaper joins the core group, so its death is the process's, not a silent one.
      name: 'ccip_stranded_reaper',
      summary: 'raises attention for CCIP sends whose delivery has not resolved past ccip.stranded_after_seconds (never sends again)',
      variables: { enabled: 'FERRY_CCIP_STRANDED_REAPER_ENABLED', interval: 'FERRY_CCIP_STRANDED_REAPER_INTERVAL_SECONDS', batchSize: 'FERRY_CCIP_STRANDED_REAPER_BATCH_SIZE' },
      configured: (config) => (config.file as { ccip?: CcipConfig }).ccip !== undefined,
      async run(deps, s) {
        const ccip = (deps.config.file as { ccip?: CcipConfig }).ccip;
        if (!ccip) return 0;
        const { runCcipStrandedReaper } = await import('../../sweeps/ccip-stranded-reaper.ts');
        // Every worker process runs it: an attention event is written once per node (its source_key), whichever process finds it first.
        const r = await runCcipStrandedReaper(
          { pool: deps.pool, log: deps.log.child({ worker: 'ccip_stranded_reaper' }), executorKey: CCIP_DELIVERY_KEY, afterSeconds: ccip.stranded_after_seconds },
          { batchSize: s.batchSize ?? 50, maxRunMs: 0 },
        );
        return r.surfaced;
      },
    },
  ],
  registryBaselines: ccipRegistryBaselines,
  templates: [
    { key: 'ccip_send', summary: 'send a token through the CCIP Router on one chain, then wait for its execution on the other (sandbox)' },
    { key: 'ccip_send_link', summary: 'the same send paying its fee in LINK: a fee approval of the cap to the Router first (sandbox)' },
  ],
};
