/**
 * The CCIP lane's stranded-send reaper is a member of the core group (seed 000): with a ccip section
 * configured, every worker process runs it as a core loop and GET /v3/workers lists it under the
 * core group; without one its row says it is disabled. A reaper that cannot go on (its runs keep
 * failing with something a backoff cannot mend) takes its process down with exit code 1, naming it.
 * No chain is needed: the lane makes no call when it registers, and the reaper reads only Ferry's
 * tables (the RPC URLs point at a closed loopback port).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { generatePrivateKey } from 'viem/accounts';
import { stringify } from 'yaml';
import { laneCoreWorkers, startRuntime, type Runtime } from '../src/actors/runtime.ts';
import { loadConfig } from '../src/config.ts';
import { withoutLanes } from '../src/executors/lanes.ts';
import { createApp, type FerryApp } from '../src/http/app.ts';
import { log } from '../src/log.ts';
import { listHeartbeats } from '../src/persistence/heartbeats.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { sweepDefinitions } from '../src/sweeps/sweeps.ts';
import { scratchDatabase } from './helpers/db.ts';
import { exited, spawnWorker } from './helpers/processes.ts';
import { waitFor, within } from './helpers/wait.ts';

const KEY = generatePrivateKey();

function ccipFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-ccip-core-'));
  const path = join(dir, 'ferry.yaml');
  const token = (chain_id: number) => ({ chain_id, symbol: 'USDC', address: `0x${String(chain_id).padStart(40, '0')}`, decimals: 6 });
  writeFileSync(
    path,
    stringify({
      evm: {
        chains: [31337, 31338].map((chain_id) => ({ chain_id, rpc_url: 'http://127.0.0.1:9', poll_seconds: 1, max_fee_per_gas_cap_wei: '500000000000' })),
        signers: [{ key: 'hot', kind: 'local_key', private_key_env: 'CCIP_CORE_HOT_KEY', chains: [31337, 31338] }],
        tokens: [token(31337), token(31338)],
      },
      ccip: {
        chains: [
          { chain_id: 31337, selector: '5009297550715157269', router: `0x${'11'.repeat(20)}`, off_ramp: `0x${'12'.repeat(20)}` },
          { chain_id: 31338, selector: '4949039107694359620', router: `0x${'21'.repeat(20)}`, off_ramp: `0x${'22'.repeat(20)}` },
        ],
        tokens: ['USDC'],
      },
    }),
  );
  return path;
}

let runtime: Runtime | undefined;
const apps: FerryApp[] = [];
after(async () => {
  for (const app of apps) await app.close();
  await runtime?.stop();
});

test('the reaper is a core worker of the ccip lane, not a sweep; removing the lane removes it', () => {
  const file = ccipFile();
  const configured = loadConfig({ FERRY_CONFIG_FILE: file, CCIP_CORE_HOT_KEY: KEY });
  const workers = laneCoreWorkers(configured);
  assert.deepEqual(
    workers.map((w) => [w.worker.name, w.enabled, w.intervalSeconds, w.batchSize]),
    [['ccip_stranded_reaper', true, 60, 50]],
  );
  assert.ok(!sweepDefinitions.some((d) => d.name === 'ccip_stranded_reaper'), 'not a pg-boss sweep');
  // Its switch, and the lane unconfigured, turn it off; the lane removed, it is gone.
  assert.equal(laneCoreWorkers(loadConfig({ FERRY_CONFIG_FILE: file, CCIP_CORE_HOT_KEY: KEY, FERRY_CCIP_STRANDED_REAPER_ENABLED: 'false' }))[0].enabled, false);
  assert.equal(laneCoreWorkers(loadConfig({}))[0].enabled, false);
  assert.deepEqual(laneCoreWorkers(loadConfig({}, withoutLanes(['ccip'])), withoutLanes(['ccip'])), []);
});

test('with ccip configured, GET /v3/workers lists ccip_stranded_reaper in the core group, running', async (t) => {
  const db = await scratchDatabase(t);
  const config = loadConfig({
    DATABASE_URL: db.url,
    FERRY_DATA_DIR: mkdtempSync(join(tmpdir(), 'ferry-ccip-core-data-')),
    FERRY_LOG_LEVEL: 'silent',
    FERRY_CONFIG_FILE: ccipFile(),
    CCIP_CORE_HOT_KEY: KEY,
    FERRY_CCIP_STRANDED_REAPER_INTERVAL_SECONDS: '0.2',
  });
  runtime = await startRuntime({ pool: db.pool, config, databaseUrl: db.url, log, env: { CCIP_CORE_HOT_KEY: KEY }, workers: true });
  const app = createApp({ pool: db.pool, config, runtime });
  apps.push(app);
  const viewer = await createToken(db.pool, { name: 'ccip-core-viewer', role: 'viewer' });
  const body = await waitFor('the reaper to run', async () => {
    const res = await app.request('/v3/workers', { headers: { authorization: `Bearer ${viewer.token}` } });
    assert.equal(res.status, 200);
    const b = (await res.json()) as any;
    const row = b.loops.find((l: any) => l.worker_name === 'ccip_stranded_reaper' && l.process_id === runtime!.processId);
    return row && Number(row.loop_runs) > 0 ? b : null;
  });
  const reaper = body.loops.find((l: any) => l.worker_name === 'ccip_stranded_reaper' && l.process_id === runtime!.processId);
  assert.ok(reaper, 'listed with the core loops');
  assert.equal(reaper.consecutive_errors, 0);
  const beat = (await listHeartbeats(db.pool)).find((h) => h.worker_name === 'ccip_stranded_reaper')!;
  assert.equal(beat.group_name, 'core');
  assert.equal(beat.enabled, true);
  const me = body.processes.find((p: any) => p.process_id === runtime!.processId);
  assert.ok(me.groups.core.expected >= 2, 'the reaper counts among the core group');
  assert.ok(!me.groups.core.not_running.includes('ccip_stranded_reaper'));
  assert.ok(!body.sweeps.some((s: any) => s.name === 'ccip_stranded_reaper'));
  await runtime.stop();
  runtime = undefined;
});

test('a ccip_stranded_reaper whose runs keep failing takes its worker process down with exit code 1, naming it', async (t) => {
  const db = await scratchDatabase(t);
  const worker = spawnWorker(
    db.url,
    {
      FERRY_CONFIG_FILE: ccipFile(),
      CCIP_CORE_HOT_KEY: KEY,
      FERRY_CORE_WORKER_CRASH_AFTER_FAILURES: '3',
      FERRY_CCIP_STRANDED_REAPER_INTERVAL_SECONDS: '0.2',
      FERRY_LOG_LEVEL: 'warn',
    },
    { output: 'pipe' },
  );
  let out = '';
  worker.stdout!.on('data', (d) => (out += String(d)));
  t.after(() => void worker.kill('SIGKILL'));
  await waitFor('the reaper to beat', async () => (await listHeartbeats(db.pool)).some((h) => h.pid === worker.pid && h.worker_name === 'ccip_stranded_reaper' && h.group_name === 'core'));
  // A schema the reaper's query no longer fits (undefined column; no other core worker reads it).
  await db.pool.query('ALTER TABLE attention_events RENAME COLUMN source_key TO source_key_moved');
  const { code } = await within('the worker to exit', exited(worker));
  assert.equal(code, 1, out);
  const fatal = out.split('\n').filter((l) => l.includes('core worker died'));
  assert.equal(fatal.length, 1, out);
  const line = JSON.parse(fatal[0]);
  assert.equal(line.worker, 'ccip_stranded_reaper');
  assert.match(line.err.message, /ccip_stranded_reaper failed 3 runs in a row: .*source_key/);
});
