import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backoffSeconds, runLoop, Waker, WorkerCrash } from '../src/actors/loop-runner.ts';
import { superviseWorkers } from '../src/actors/supervisor.ts';
import { log } from '../src/log.ts';

const quiet = log.child({ test: 'supervisor' });
quiet.level = 'silent';

test('a sidecar worker that crashes is logged; the others keep running', async () => {
  let coreRuns = 0;
  let otherSidecarRuns = 0;
  const sup = superviseWorkers(
    {
      core: [{ name: 'core', intervalMs: 1, run: async () => (coreRuns++, 0) }],
      sidecar: [
        { name: 'broken', intervalMs: 1, run: async () => { throw new WorkerCrash('sidecar broke'); } },
        { name: 'fine', intervalMs: 1, run: async () => (otherSidecarRuns++, 0) },
      ],
    },
    quiet,
  );
  await new Promise((r) => setTimeout(r, 400));
  const [core, side] = [coreRuns, otherSidecarRuns];
  await new Promise((r) => setTimeout(r, 400));
  assert.deepEqual(sup.crashedSidecars(), ['broken']);
  assert.ok(coreRuns > core && otherSidecarRuns > side, 'core and the other sidecar still run after the crash');
  await sup.stop();
  await sup.done;
});

test('a core worker that dies stops the core group and the supervision fails', async () => {
  let otherCoreRuns = 0;
  const sup = superviseWorkers(
    {
      core: [
        { name: 'dies', intervalMs: 1, run: async () => { throw new WorkerCrash('core broke'); } },
        { name: 'other', intervalMs: 1, run: async () => (otherCoreRuns++, 0) },
      ],
      sidecar: [{ name: 'side', intervalMs: 1, run: async () => 0 }],
    },
    quiet,
  );
  await assert.rejects(sup.done, /core broke/);
  const after = otherCoreRuns;
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(otherCoreRuns, after, 'the rest of the core group stopped');
});

test('ordinary errors are counted and retried; five in a row back off min(2^n, 60) s', async () => {
  assert.deepEqual([1, 5, 6, 7, 10].map(backoffSeconds), [2, 32, 60, 60, 60]);
  let runs = 0;
  const abort = new AbortController();
  const waker = new Waker();
  const seen: number[] = [];
  const loop = runLoop(
    {
      name: 'flaky',
      intervalMs: 1,
      waker,
      run: async () => {
        runs++;
        throw new Error('provider down');
      },
      onRun: (stats) => seen.push(stats.consecutiveErrors),
    },
    abort.signal,
    quiet,
  );
  await new Promise((r) => setTimeout(r, 1500));
  // Four quick retries at the interval, then the fifth failure starts a 32 s backoff.
  assert.equal(runs, 5);
  assert.deepEqual(seen, [1, 2, 3, 4, 5]);
  waker.wake(); // a wake-up ends the backoff sleep early
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(runs, 6);
  abort.abort();
  await loop;
});

test('a loop that handled items runs again at once; an idle one sleeps until woken', async () => {
  let runs = 0;
  const abort = new AbortController();
  const waker = new Waker();
  const loop = runLoop({ name: 'drain', intervalMs: 60_000, waker, run: async () => (++runs <= 3 ? 1 : 0) }, abort.signal, quiet);
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(runs, 4, 'three busy runs back to back, then one idle run, then sleep');
  waker.wake();
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(runs, 5);
  abort.abort();
  await loop;
});

test('one wake-up wakes every loop sleeping on a shared waker', async () => {
  const waker = new Waker();
  const abort = new AbortController();
  const woken: number[] = [];
  const sleepers = [1, 2, 3].map((i) => waker.sleep(60_000, abort.signal).then(() => woken.push(i)));
  waker.wake();
  await Promise.all(sleepers);
  assert.deepEqual(woken.sort(), [1, 2, 3]);
  // A wake-up with nobody asleep is kept for the next sleeper.
  waker.wake();
  const started = Date.now();
  await waker.sleep(60_000, abort.signal);
  assert.ok(Date.now() - started < 1000);
});
