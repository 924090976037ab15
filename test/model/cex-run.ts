/**
 * The CEX lane's random runs (test/model/lane-run.ts): withdrawals from an account on the Binance
 * emulator (test/emulators/binance.ts, through ccxt), each worker reaching it through a proxy of
 * its own. Faults beyond the common ones:
 *
 * - kill_after_accept: the exchange accepted a withdraw/apply and its answer is held from the
 *   worker that sent it, which is SIGKILLed: the exchange withdrew, Ferry recorded nothing;
 * - exchange_5xx, exchange_rate_limit: the exchange answers its next requests with 503, or 429 with
 *   Retry-After (it did nothing);
 * - exchange_down: the exchange is unreachable (connections reset) for a while;
 * - exchange_slow: for a while its answers come after the client's timeout (it acted; Ferry heard
 *   nothing).
 *
 * One movement of each run asks for an amount the network's withdraw step cannot carry: the model
 * expects it FAILED with CEX_AMOUNT_PRECISION and nothing withdrawn. Then the exchange's ledger is
 * read: S1, one withdrawal per approved node, under the client withdrawal id of the node's
 * recorded attempt, and nothing the ledger holds that no node accounts for; S3, each of the approved
 * amount (exactly: no rounding to the network's precision), to the approved address, the one the
 * node records, and paid so on chain; S4, nothing withdrawn for a movement that did not complete;
 * the account's balance is its opening balance less what the ledger lists.
 *
 * The stalls and slow answers stay below the account's `not_found_after_seconds` (8 s here): a
 * withdraw call that reaches the exchange later than that would be a second withdrawal (the timing
 * assumption of docs/design.md).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatEther, parseEther, type Address, type PublicClient } from 'viem';
import { stringify } from 'yaml';
import { CEX_WITHDRAWAL_ACTION_KEY } from '../../src/executors/cex/index.ts';
import type { Pool } from '../../src/persistence/db.ts';
import { startBinanceEmulator, type BinanceEmulator } from '../emulators/binance.ts';
import { ANVIL_DEV_KEY, freshAddress, type Anvil } from '../helpers/anvil.ts';
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy.ts';
import { seedMovement } from '../helpers/fixtures.ts';
import { plan } from '../helpers/runtime.ts';
import type { FaultSpec, LaneDefinition, LaneInstance, LaneRunOptions, RunContext, RunMovement } from './lane-run.ts';

export type CexFault = 'kill_after_accept' | 'exchange_5xx' | 'exchange_rate_limit' | 'exchange_down' | 'exchange_slow';

const APPLY = '/sapi/v1/capital/withdraw/apply';
const CREDS = { RUN_EX_KEY: 'run-ex-api-key-0123456789abcdefghijklmnopqrstuvwxyzAB', RUN_EX_SECRET: 'run-ex-api-secret-ZYXWVUTSRQPONMLKJIHGFEDCBA98765432' };
const OPENING = '100';
/** The client's timeout, and how late a slow answer comes (after it). */
const TIMEOUT_MS = 2000;
const SLOW_BY_MS = 3000;
export const CEX_NOT_FOUND_AFTER_SECONDS = 8;

export const CEX_FAULTS: Record<CexFault, FaultSpec> = {
  kill_after_accept: { window: [0, 0.5], ms: [0, 1500], describe: (s) => `arm: SIGKILL the worker whose withdraw/apply the exchange accepts next, before it hears; back after ${s.ms} ms` },
  exchange_5xx: { window: [0.05, 0.8], ms: [1, 4], describe: (s) => `the exchange answers its next ${s.ms} requests 503 (doing nothing)` },
  exchange_rate_limit: { window: [0.05, 0.8], ms: [1, 2], describe: (s) => `the exchange answers its next ${s.ms} requests 429, Retry-After 1 s` },
  exchange_down: { window: [0.05, 0.8], ms: [1000, 3000], describe: (s) => `the exchange is unreachable for ${s.ms} ms` },
  exchange_slow: { window: [0.05, 0.8], ms: [1000, 3000], describe: (s) => `for ${s.ms} ms the exchange's answers come ${SLOW_BY_MS} ms late (the client gives up at ${TIMEOUT_MS})` },
};

/** A run as CI and `npm run verify` make it (one seed, the same schedule in both): every fault kind once. */
export const CEX_RUN = {
  movements: 4,
  workers: 2,
  horizonMs: 8000,
  faults: { crash: 1, stall: 1, database: 1, kill_after_accept: 1, exchange_5xx: 1, exchange_rate_limit: 1, exchange_down: 1, exchange_slow: 1 },
} satisfies Omit<LaneRunOptions<CexFault>, 'seed'>;

/** Planted bugs: `recovery_resubmits` makes recover() answer READY (a new attempt) without asking the exchange. */
export type CexPlant = 'recovery_resubmits';

export function cexLane(local: { anvil: Anvil; chain: PublicClient }): LaneDefinition<CexFault> {
  return {
    name: 'cex',
    faults: CEX_FAULTS,
    env: { ...CREDS },
    async setup(pool: Pool, opts: LaneRunOptions<CexFault>, workers: number): Promise<LaneInstance> {
      const ex: BinanceEmulator = await startBinanceEmulator({
        apiKey: CREDS.RUN_EX_KEY,
        apiSecret: CREDS.RUN_EX_SECRET,
        rpcUrl: local.anvil.url,
        depositAddress: freshAddress(),
        hotWalletKey: ANVIL_DEV_KEY,
        balances: { ETH: OPENING },
      });
      const proxies: FaultProxy[] = [];
      const configs: string[] = [];
      for (let w = 0; w < workers; w++) {
        const proxy = await startFaultProxy(ex.url);
        proxies.push(proxy);
        const dir = mkdtempSync(join(tmpdir(), 'ferry-cex-run-'));
        const file = join(dir, 'ferry.yaml');
        const account = { key: 'exa', exchange: 'binance', base_url: proxy.url, api_key_env: 'RUN_EX_KEY', api_secret_env: 'RUN_EX_SECRET', timeout_ms: TIMEOUT_MS, networks: { ethereum: 'ETH' }, not_found_after_seconds: CEX_NOT_FOUND_AFTER_SECONDS };
        writeFileSync(file, stringify({ cex: { accounts: [account] } }));
        configs.push(file);
      }

      const movements: (RunMovement & { to: Address; amount: string })[] = [];
      // The last movement (of three or more) asks for a tenth of the ETH network's step (1e-8).
      const imprecise = opts.movements >= 3 ? opts.movements - 1 : -1;
      for (let m = 0; m < opts.movements; m++) {
        const to = freshAddress().toLowerCase() as Address;
        const amount = m === imprecise ? `0.0${m + 1}000000001` : `0.0${m + 1}${String(opts.seed % 997).padStart(3, '0')}`;
        const template = plan(`cex-run-${opts.seed}-${m}`, [
          { node_key: 'withdraw', node_kind: 'action', action_type: 'cex_withdrawal', executor_binding: { executor_key: CEX_WITHDRAWAL_ACTION_KEY, account: 'exa' }, config: { coin: 'ETH', network: 'ethereum' } },
        ]);
        const { movement } = await seedMovement(pool, template, { intent: { asset: 'ETH', amount, destination: { address: to } } });
        movements.push({
          id: movement.id,
          to,
          amount,
          describe: `withdraw ${amount} ETH`,
          expect: m === imprecise ? { state: 'FAILED', node: 'withdraw', errorCode: 'CEX_AMOUNT_PRECISION' } : { state: 'COMPLETED' },
        });
      }

      const armed: { ms: number }[] = [];
      let ctxRef: RunContext | null = null;
      proxies.forEach((proxy, w) => {
        proxy.onAnswer = (r, answer) => {
          if (!ctxRef || armed.length === 0 || r.method !== 'POST' || !r.path.startsWith(APPLY) || answer.status !== 200) return 'pass';
          const kill = armed[0]!;
          if (!ctxRef.kill(w, kill.ms, `the exchange accepted its withdraw/apply ${answer.body}; the answer is held`)) return 'pass';
          armed.shift();
          ctxRef.faultInjected('kill_after_accept');
          return 'hold';
        };
      });

      return {
        movements,
        env: (w) => ({ FERRY_CONFIG_FILE: configs[w]! }),
        preload: opts.plant === 'recovery_resubmits' ? ['./test/model/plants/cex-recovery-resubmits.ts'] : undefined,
        inject(step, ctx) {
          ctxRef = ctx;
          switch (step.kind as CexFault) {
            case 'kill_after_accept':
              armed.push({ ms: step.ms });
              ctx.note(`armed: SIGKILL at the next accepted withdraw/apply`);
              return;
            case 'exchange_5xx':
              ex.fault({ fault: { kind: 'status', status: 503 }, times: step.ms });
              break;
            case 'exchange_rate_limit':
              ex.fault({ fault: { kind: 'status', status: 429, retryAfterSeconds: 1 }, times: step.ms });
              break;
            case 'exchange_down':
              for (const p of proxies) p.down(step.ms);
              break;
            case 'exchange_slow':
              for (const p of proxies) p.slow(step.ms, SLOW_BY_MS);
              break;
          }
          ctx.faultInjected(step.kind);
          ctx.note(`${step.kind}: ${CEX_FAULTS[step.kind as CexFault].describe(step)}`);
        },
        disarm() {
          armed.length = 0;
          ex.clearFaults();
        },
        async check(rows) {
          await ex.settled();
          const violations: string[] = [];
          const ledger = ex.withdrawals;
          const accounted = new Set<string>();
          for (const [i, r] of rows.entries()) {
            const m = movements[i]!;
            const node = r.byKey.withdraw;
            const name = `movement ${i} (${m.describe}, ${m.id})`;
            if (!node) {
              violations.push(`S4: ${name} has no withdraw node`);
              continue;
            }
            const mine = ledger.filter((x) => x.withdrawOrderId?.startsWith(`${node.id}:`));
            for (const x of mine) accounted.add(x.id);
            const list = mine.map((x) => `${x.withdrawOrderId} (${x.amount})`).join(', ');
            if (mine.length > 1) violations.push(`S1: ${name}: node withdraw has ${mine.length} withdrawals on the exchange's ledger: ${list}`);
            if (r.state === 'COMPLETED') {
              if (mine.length === 0) violations.push(`S4: ${name} is COMPLETED and the exchange withdrew nothing`);
              const recorded = mine.find((x) => x.id === node.provider_refs?.exchange_withdrawal_id);
              if (mine.length >= 1 && !recorded) violations.push(`S3: ${name} records exchange withdrawal ${String(node.provider_refs?.exchange_withdrawal_id)}, the ledger lists ${list}`);
              if (recorded) {
                if (recorded.withdrawOrderId !== `${node.id}:${node.attempt_no}`) violations.push(`S3: ${name}: the withdrawal's client id is ${recorded.withdrawOrderId}, the node's attempt is ${node.attempt_no}`);
                if (parseEther(recorded.amount) !== parseEther(m.amount)) violations.push(`S3: ${name}: withdrew ${recorded.amount} ETH, approved ${m.amount}`);
                if (recorded.address.toLowerCase() !== m.to) violations.push(`S3: ${name}: withdrew to ${recorded.address}, approved ${m.to}`);
                if (recorded.status === 5) violations.push(`S4: ${name} is COMPLETED and its withdrawal failed at the exchange: ${recorded.info}`);
                const paid = await local.chain.getBalance({ address: m.to });
                if (paid !== parseEther(m.amount)) violations.push(`S3: ${name}: the chain paid ${formatEther(paid)} ETH to the destination, approved ${m.amount}`);
              }
            } else if (mine.length > 0) {
              violations.push(`S4: ${name} ended ${r.state} and the exchange withdrew for it: ${list}`);
            }
          }
          const stray = ledger.filter((x) => !accounted.has(x.id));
          if (stray.length > 0) violations.push(`S1: ${stray.length} withdrawal(s) on the ledger no node accounts for: ${stray.map((x) => `${x.withdrawOrderId} ${x.amount} to ${x.address}`).join(', ')}`);
          const out = ledger.filter((x) => x.status !== 5).reduce((sum, x) => sum + parseEther(x.amount), 0n);
          if (parseEther(ex.balance('ETH')) !== parseEther(OPENING) - out) violations.push(`S1: the account holds ${ex.balance('ETH')} ETH, its opening ${OPENING} less the ledger's withdrawals is ${formatEther(parseEther(OPENING) - out)}`);
          return { violations, effects: { withdrawals: ledger.length, 'withdraw/apply calls': ex.applies.length } };
        },
        async stop() {
          for (const p of proxies) await p.stop();
          await ex.stop();
        },
      };
    },
  };
}
