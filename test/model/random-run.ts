/**
 * Model-based runs of the real system: a seeded schedule drawn from the model's alphabet (people
 * approve; a process crashes or stalls past its grace; the provider stops answering; and, beyond the
 * exhaustive model, the database restarts) executed against real worker processes, a real
 * PostgreSQL (an embedded server of its own, so it can be restarted) and ERC-20 transfers on anvil
 * behind an RPC proxy that can stall. Afterwards the chain, not Ferry's tables, says what was paid,
 * and the tables are held against it and against the model's rules:
 *
 * - S1 on chain: at most one Transfer to each movement's destination, none from the wallet that no
 *   movement accounts for;
 * - S3: a paid movement was paid exactly its approved amount, by the transaction its node recorded;
 * - S4: a COMPLETED movement has every node COMPLETED, and nothing paid a movement that did not end
 *   COMPLETED;
 * - S5: every movement's transition log replays to its rows (reconcileMovement);
 * - L1: once the faults stop, every approved movement ends, and since this provider always answers
 *   in the end, the model expects each to end COMPLETED.
 *
 * The schedule depends on the seed alone, so a failing seed replays the same faults at the same
 * moments (the interleavings inside them are the machine's).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { erc20Abi, type Address, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { prng } from '../../scripts/lib/prng.ts';
import { reconcileMovement } from '../../src/sweeps/reconciliation.ts';
import { deliverMovementEvent } from '../../src/durable/transition.ts';
import { EVM_ERC20_TRANSFER_KEY } from '../../src/executors/evm/index.ts';
import { createPool, withTransaction, type Pool } from '../../src/persistence/db.ts';
import { startEmbeddedPostgres, type EmbeddedServer } from '../../src/persistence/embedded.ts';
import { migrate } from '../../src/persistence/migrate.ts';
import { getMovement, nodesOfMovement, transitionsOfMovement } from '../../src/persistence/movements.ts';
import { prepareDatabase } from '../../src/persistence/roles.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_KEY, freshAddress, type Anvil } from '../helpers/anvil.ts';
import { sendCall, type DeployedToken } from '../helpers/contracts.ts';
import { writeConfigFile } from '../helpers/evm.ts';
import { collectingDeps, seedMovement } from '../helpers/fixtures.ts';
import { freePort } from '../helpers/net.ts';
import { exited, spawnWorker } from '../helpers/processes.ts';
import { startRpcProxy } from '../helpers/rpc-proxy.ts';
import { plan } from '../helpers/runtime.ts';
import { waitFor } from '../helpers/wait.ts';

export interface RandomRunOptions {
  seed: number;
  movements: number;
  workers: number;
  /** How many of each fault the schedule holds. */
  faults: { crashes: number; stalls: number; provider: number; database: number };
  /** The span over which approvals and faults are spread. Default 12 s. */
  horizonMs?: number;
  /**
   * A planted fault the check must report: `double_payment` pays movement 0's destination again from
   * the wallet once the run is over, as a second send of one attempt would.
   */
  plant?: 'double_payment';
}

export type Step =
  | { at: number; kind: 'approve'; movement: number }
  | { at: number; kind: 'crash'; worker: number; downMs: number }
  | { at: number; kind: 'stall'; worker: number; ms: number }
  | { at: number; kind: 'provider'; ms: number }
  | { at: number; kind: 'database'; downMs: number };

export interface RandomRunReport {
  seed: number;
  schedule: string[];
  states: Record<string, number>;
  transfers: number;
  faultsInjected: number;
  /** The faults injected, by kind. */
  faults: Record<string, number>;
  violations: string[];
  ms: number;
  /** The workers' last output, for a failing run. */
  workerTail: string;
}

/** The run's schedule, from the seed alone: approvals in the first half, faults anywhere. */
export function schedule(opts: RandomRunOptions): Step[] {
  const rand = prng(opts.seed);
  const horizon = opts.horizonMs ?? 12_000;
  const between = (lo: number, hi: number) => Math.round(lo + rand() * (hi - lo));
  const steps: Step[] = [];
  for (let m = 0; m < opts.movements; m++) steps.push({ at: between(0, horizon / 2), kind: 'approve', movement: m });
  for (let i = 0; i < opts.faults.crashes; i++) steps.push({ at: between(500, horizon), kind: 'crash', worker: between(0, opts.workers - 1), downMs: between(0, 1500) });
  // Past the SUBMITTING grace (1 s) and the nonce reaper's stuck limit (3 s), so recovery and the
  // reaper act on what the stalled process holds.
  for (let i = 0; i < opts.faults.stalls; i++) steps.push({ at: between(500, horizon), kind: 'stall', worker: between(0, opts.workers - 1), ms: between(1500, 5000) });
  for (let i = 0; i < opts.faults.provider; i++) steps.push({ at: between(500, horizon), kind: 'provider', ms: between(1000, 5000) });
  for (let i = 0; i < opts.faults.database; i++) steps.push({ at: between(2000, horizon), kind: 'database', downMs: between(500, 2500) });
  return steps.sort((a, b) => a.at - b.at);
}

const describe = (s: Step): string => {
  switch (s.kind) {
    case 'approve':
      return `+${s.at} ms approve movement ${s.movement}`;
    case 'crash':
      return `+${s.at} ms SIGKILL worker ${s.worker}, back after ${s.downMs} ms`;
    case 'stall':
      return `+${s.at} ms SIGSTOP worker ${s.worker} for ${s.ms} ms`;
    case 'provider':
      return `+${s.at} ms the chain's RPC stops answering for ${s.ms} ms`;
    case 'database':
      return `+${s.at} ms PostgreSQL stops, back after ${s.downMs} ms`;
  }
};

const WORKER_ENV = {
  // Past these, recovery asks the chain about a SUBMITTING node, and gives a dispatch abandoned in
  // PREPARING or AWAITING_SIGNATURE (its process died or stalled there) back to READY.
  FERRY_SUBMITTING_GRACE_SECONDS: '2',
  FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'evm=1',
  FERRY_NODE_RECOVERY_INTERVAL_SECONDS: '0.5',
  FERRY_NODE_DISPATCH_INTERVAL_SECONDS: '0.2',
  // The reaper takes back reservations that look stuck after 3 s: the race of issue S1's finding.
  FERRY_EVM_NONCE_REAPER_INTERVAL_SECONDS: '1',
  FERRY_EVM_NONCE_STUCK_SECONDS: '3',
  FERRY_LEASE_TTL_SECONDS: '3',
  FERRY_DB_POOL_MAX: '6',
  FERRY_WORKER_POOL_MAX: '6',
  FERRY_LOG_LEVEL: 'warn',
};

const TERMINAL = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'REJECTED', 'EXPIRED', 'MANUAL_INTERVENTION']);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function randomRun(opts: RandomRunOptions, local: { anvil: Anvil; chain: PublicClient; usdc: DeployedToken }): Promise<RandomRunReport> {
  const started = Date.now();
  const steps = schedule(opts);
  const violations: string[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), 'ferry-random-run-'));
  const port = await freePort();
  let server: EmbeddedServer = await startEmbeddedPostgres({ dataDir, port });
  const url = server.appUrl;
  await prepareDatabase({ ownerUrl: server.url, appUrl: url, setup: true, migrate: (owner) => migrate(owner) });
  let pool: Pool = createPool(url, 4);
  const proxy = await startRpcProxy(local.anvil.url, 'pass');

  const key = generatePrivateKey();
  const wallet = privateKeyToAccount(key).address;
  await local.anvil.rpc('anvil_setBalance', [wallet, '0x56bc75e2d63100000']);
  await sendCall(local.chain, local.anvil.url, ANVIL_DEV_KEY, local.usdc, 'mint', [wallet, 1_000_000_000n]);
  const config = writeConfigFile({
    chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: proxy.url, poll_seconds: 0.2 }],
    signers: [{ key: 'hot_1', kind: 'local_key', private_key_env: 'HOT_1_KEY', chains: [ANVIL_CHAIN_ID] }],
    tokens: [{ chain_id: ANVIL_CHAIN_ID, symbol: 'USDC', address: local.usdc.address, decimals: 6 }],
  });
  const env = { ...WORKER_ENV, FERRY_CONFIG_FILE: config, HOT_1_KEY: key };

  const movements: { id: string; to: Address; units: bigint }[] = [];
  for (let m = 0; m < opts.movements; m++) {
    const to = freshAddress();
    // Distinct amounts: a payment landing on the wrong movement would show.
    const units = BigInt(1_000_000 + m * 10_001);
    const template = plan(`random-run-${opts.seed}-${m}`, [
      { node_key: 'pay', node_kind: 'action', action_type: 'erc20_transfer', executor_binding: EVM_ERC20_TRANSFER_KEY, signer_binding: 'hot_1', config: { token: 'USDC', to } },
    ]);
    const amount = `${units / 1_000_000n}.${(units % 1_000_000n).toString().padStart(6, '0')}`;
    const { movement } = await seedMovement(pool, template, { intent: { asset: 'USDC', amount } });
    movements.push({ id: movement.id, to, units });
  }

  let tail = '';
  const keep = (chunk: string) => {
    tail = (tail + chunk).slice(-20_000);
  };
  const killed = new WeakSet<ChildProcess>();
  let finishing = false;
  const pending: Promise<unknown>[] = [];
  const spawn = (w: number): ChildProcess => {
    const child = spawnWorker(url, env, { output: 'pipe' });
    child.stdout!.setEncoding('utf8').on('data', keep);
    // The process manager's part: a worker that exits on its own (it started while the database was
    // down, or a core worker gave up) is started again. A run without it ends with no worker left.
    child.once('exit', () => {
      if (finishing || killed.has(child) || workers[w] !== child) return;
      pending.push(sleep(500).then(() => void (workers[w] === child && !finishing && (workers[w] = spawn(w)))));
    });
    return child;
  };
  const workers: ChildProcess[] = [];
  for (let w = 0; w < opts.workers; w++) workers.push(spawn(w));
  const stopped = new Set<number>();
  let faults = 0;
  const kinds: Record<string, number> = {};
  const injected = (kind: string) => {
    faults++;
    kinds[kind] = (kinds[kind] ?? 0) + 1;
  };
  const approveLater: number[] = [];

  const approve = async (m: number) => {
    try {
      await withTransaction(pool, (c) => deliverMovementEvent(c, movements[m].id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: collectingDeps() }));
    } catch {
      // The database is down: approve once it is back.
      approveLater.push(m);
    }
  };

  try {
    const t0 = Date.now();
    for (const step of steps) {
      const wait = t0 + step.at - Date.now();
      if (wait > 0) await sleep(wait);
      switch (step.kind) {
        case 'approve':
          await approve(step.movement);
          break;
        case 'crash': {
          const w = step.worker;
          if (stopped.has(w)) break;
          injected('crash');
          killed.add(workers[w]);
          workers[w].kill('SIGKILL');
          await exited(workers[w]);
          pending.push(sleep(step.downMs).then(() => (workers[w] = spawn(w))));
          break;
        }
        case 'stall': {
          const w = step.worker;
          const child = workers[w];
          if (stopped.has(w) || child.exitCode !== null || child.signalCode !== null) break;
          injected('stall');
          stopped.add(w);
          child.kill('SIGSTOP');
          pending.push(sleep(step.ms).then(() => (child.kill('SIGCONT'), stopped.delete(w))));
          break;
        }
        case 'provider':
          injected('provider');
          proxy.stall(step.ms);
          break;
        case 'database':
          injected('database');
          await pool.end().catch(() => {});
          await server.stop();
          await sleep(step.downMs);
          server = await startEmbeddedPostgres({ dataDir, port });
          pool = createPool(url, 4);
          break;
      }
    }
    await Promise.all(pending);
    for (const m of approveLater.splice(0)) await approve(m);
    if (approveLater.length > 0) violations.push(`could not approve movements ${approveLater.join(', ')} after the faults`);

    // L1: with the faults over, every movement ends.
    const ended = await waitFor(
      'every movement to end after the faults',
      async () => {
        const states = await Promise.all(movements.map(async (m) => (await getMovement(pool, m.id))?.request_state ?? 'MISSING'));
        return states.every((s) => TERMINAL.has(s)) ? states : null;
      },
      { timeoutMs: 180_000, everyMs: 250 },
    ).catch((err: Error) => {
      violations.push(`L1: ${err.message}`);
      return null;
    });

    if (opts.plant === 'double_payment') await sendCall(local.chain, local.anvil.url, key, local.usdc, 'transfer', [movements[0].to, movements[0].units]);

    // What the chain says was paid, from the wallet.
    const logs = await local.chain.getContractEvents({ address: local.usdc.address, abi: erc20Abi, eventName: 'Transfer', args: { from: wallet }, fromBlock: 0n, toBlock: 'latest' });
    const accounted = new Set<string>();
    const states: Record<string, number> = {};
    for (const [i, m] of movements.entries()) {
      const row = (await getMovement(pool, m.id))!;
      const nodes = await nodesOfMovement(pool, m.id);
      const log = await transitionsOfMovement(pool, m.id);
      const state = ended?.[i] ?? row.request_state;
      states[state] = (states[state] ?? 0) + 1;
      const paid = logs.filter((l) => l.args.to?.toLowerCase() === m.to.toLowerCase());
      for (const p of paid) accounted.add(p.transactionHash);
      const name = `movement ${i} (${m.id})`;
      if (paid.length > 1) violations.push(`S1: ${name} was paid ${paid.length} times: ${paid.map((p) => p.transactionHash).join(', ')}`);
      if (state === 'COMPLETED') {
        if (paid.length === 0) violations.push(`S4: ${name} is COMPLETED and nothing was paid`);
        if (paid.length === 1 && paid[0].args.value !== m.units) violations.push(`S3: ${name} was paid ${paid[0].args.value} base units, approved ${m.units}`);
        const recorded = nodes[0]?.provider_refs?.tx_hash;
        if (paid.length === 1 && recorded !== paid[0].transactionHash) violations.push(`S3: ${name} records ${String(recorded)}, the chain paid it by ${paid[0].transactionHash}`);
        for (const n of nodes) if (n.node_state !== 'COMPLETED' && n.node_state !== 'SKIPPED') violations.push(`S4: ${name} is COMPLETED with node ${n.node_key} ${n.node_state}`);
      } else {
        if (paid.length > 0) violations.push(`S4: ${name} ended ${state} and was paid by ${paid.map((p) => p.transactionHash).join(', ')}`);
        // The provider always answered in the end and nobody refused: the model expects COMPLETED.
        violations.push(`L1: ${name} ended ${state} (${nodes.map((n) => `${n.node_key} ${n.node_state} ${n.error_code ?? ''}`.trim()).join(', ')}), the model expects COMPLETED`);
      }
      for (const d of reconcileMovement(row, nodes, log)) violations.push(`S5: ${name}: ${JSON.stringify(d)}`);
    }
    const stray = logs.filter((l) => !accounted.has(l.transactionHash));
    if (stray.length > 0) violations.push(`S1: ${stray.length} Transfer(s) from the wallet no movement accounts for: ${stray.map((l) => `${l.transactionHash} to ${l.args.to}`).join(', ')}`);
    return { seed: opts.seed, schedule: steps.map(describe), states, transfers: logs.length, faultsInjected: faults, faults: kinds, violations, ms: Date.now() - started, workerTail: tail };
  } finally {
    finishing = true;
    for (const w of workers) {
      w.kill('SIGCONT');
      w.kill('SIGTERM');
    }
    await Promise.all(workers.map((w) => Promise.race([exited(w), sleep(15_000).then(() => w.kill('SIGKILL'))])));
    await proxy.stop();
    await pool.end().catch(() => {});
    await server.stop().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** A report in a few lines: the figures, and the schedule and violations when there are any. */
export function formatRun(r: RandomRunReport): string {
  const head = `seed ${r.seed}: ${Object.entries(r.states).map(([s, n]) => `${n} ${s}`).join(', ')}; ${r.transfers} transfers on chain; ${r.faultsInjected} faults; ${r.violations.length} violations; ${(r.ms / 1000).toFixed(1)} s`;
  if (r.violations.length === 0) return head;
  return [head, '  schedule:', ...r.schedule.map((s) => `    ${s}`), '  violations:', ...r.violations.map((v) => `    ${v}`)].join('\n');
}
