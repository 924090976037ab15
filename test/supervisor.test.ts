import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backoffSeconds, runLoop, Waker, WorkerCrash } from '../src/actors/loop-runner.ts';
import { restartDelayMs, superviseWorkers } from '../src/actors/supervisor.ts';
import { log } from '../src/log.ts';
import { waitFor } from './helpers/wait.ts';

const quiet = log.child({ test: 'supervisor' });
quiet.level = 'silent';

/** A waker that records every sleep a loop asks for, so a test sees how long it would wait. */
class RecordingWaker extends Waker {
  readonly sleeps: number[] = [];
  override sleep(ms: number, signal: AbortSignal): Promise<void> {
    this.sleeps.push(ms);
    return super.sleep(ms, signal);
  }
}

/** Lets every queued callback and immediate run, so a loop that is able to run gets to. */
const settle = () => new Promise<void>((r) => setImmediate(() => setImmediate(r)));

test('a sidecar worker that crashes is restarted after a backoff; the others keep running', async () => {
  let coreRuns = 0;
  let otherSidecarRuns = 0;
  let brokenStarts = 0;
  const events: string[] = [];
  const delays: number[] = [];
  const sup = superviseWorkers(
    {
      core: [{ name: 'core', intervalMs: 1, run: async () => (coreRuns++, 0) }],
      sidecar: [
        {
          name: 'broken',
          intervalMs: 1,
          run: async () => {
            brokenStarts++;
            throw new WorkerCrash('sidecar broke');
          },
        },
        { name: 'fine', intervalMs: 1, run: async () => (otherSidecarRuns++, 0) },
      ],
    },
    quiet,
    {
      onEvent: (worker, event) => events.push(`${worker}:${event}`),
      restartDelayMs: (n) => (delays.push(n), 5),
    },
  );
  await waitFor('the broken sidecar to be restarted three times', () => (sup.restarts().broken ?? 0) >= 3);
  assert.ok(brokenStarts >= 4, 'each restart runs the worker again');
  assert.deepEqual(delays.slice(0, 3), [1, 2, 3], 'the backoff grows with the crashes in a row');
  assert.deepEqual(events.slice(0, 4), ['broken:restarting', 'broken:restarted', 'broken:restarting', 'broken:restarted']);
  assert.equal(sup.restarts().fine, undefined, 'a healthy sidecar is never restarted');
  const [core, side] = [coreRuns, otherSidecarRuns];
  await waitFor('core and the other sidecar to run again after the crashes', () => coreRuns > core && otherSidecarRuns > side);
  await sup.stop();
  await sup.done;
  assert.deepEqual([1, 2, 5, 6, 7].map(restartDelayMs), [2000, 4000, 32_000, 60_000, 60_000]);
});

test('a sidecar waiting for its restart does not hold up stop()', async () => {
  const sup = superviseWorkers(
    { core: [], sidecar: [{ name: 'broken', intervalMs: 1, run: async () => { throw new WorkerCrash('broke'); } }] },
    quiet,
    { restartDelayMs: () => 3_600_000 },
  );
  await settle();
  await sup.stop();
  await sup.done;
  assert.deepEqual(sup.restarts(), {});
});

test('a core worker that dies stops the core group and the supervision fails', async () => {
  let otherCoreRuns = 0;
  const otherWaker = new Waker();
  const sup = superviseWorkers(
    {
      core: [
        { name: 'dies', intervalMs: 1, run: async () => { throw new WorkerCrash('core broke'); } },
        { name: 'other', intervalMs: 60_000, waker: otherWaker, run: async () => (otherCoreRuns++, 0) },
      ],
      sidecar: [{ name: 'side', intervalMs: 1, run: async () => 0 }],
    },
    quiet,
  );
  await assert.rejects(sup.done, /core broke/);
  const after = otherCoreRuns;
  // A live loop would run at once when woken; the stopped one does not.
  otherWaker.wake();
  await settle();
  assert.equal(otherCoreRuns, after, 'the rest of the core group stopped');
});

test('ordinary errors are counted and retried; five in a row back off min(2^n, 60) s', async () => {
  assert.deepEqual([1, 5, 6, 7, 10].map(backoffSeconds), [2, 32, 60, 60, 60]);
  let runs = 0;
  const abort = new AbortController();
  const waker = new RecordingWaker();
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
  // Four quick retries at the interval (at least 100 ms), then the fifth failure starts a 32 s backoff.
  await waitFor('five failed runs and the sleep after them', () => waker.sleeps.length === 5);
  assert.equal(runs, 5);
  assert.deepEqual(seen, [1, 2, 3, 4, 5]);
  assert.deepEqual(waker.sleeps, [100, 100, 100, 100, 32_000]);
  waker.wake(); // a wake-up ends the backoff sleep early
  await waitFor('the run after the wake-up', () => runs === 6);
  assert.equal(waker.sleeps[5], 60_000, 'the sixth failure in a row backs off 60 s');
  abort.abort();
  await loop;
});

test('a loop that handled items runs again at once; an idle one sleeps until woken', async () => {
  let runs = 0;
  const abort = new AbortController();
  const waker = new RecordingWaker();
  const loop = runLoop({ name: 'drain', intervalMs: 60_000, waker, run: async () => (++runs <= 3 ? 1 : 0) }, abort.signal, quiet);
  await waitFor('the idle run to go to sleep', () => waker.sleeps.length === 1);
  assert.equal(runs, 4, 'three busy runs back to back, then one idle run, then sleep');
  assert.deepEqual(waker.sleeps, [60_000], 'no sleep between the busy runs; the idle one sleeps the interval');
  waker.wake();
  await waitFor('the run after the wake-up', () => runs === 5);
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
  // A wake-up with nobody asleep is kept for the next sleeper, which does not sleep at all.
  waker.wake();
  const first = await Promise.race([waker.sleep(60_000, abort.signal).then(() => 'woken'), settle().then(() => 'still asleep')]);
  assert.equal(first, 'woken');
  abort.abort();
});

test('a loop with crashAfter crashes after that many failures in a row; tolerated errors and a success start the count again', async () => {
  const abort = new AbortController();
  const outage = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  const bug = new TypeError("Cannot read properties of undefined (reading 'id')");
  // bug, bug, outage (excused: the count starts again), bug, ok (starts again), bug, bug, bug: crash.
  const script: Array<Error | null> = [bug, bug, outage, bug, null, bug, bug, bug, null];
  let runs = 0;
  const crash = await runLoop(
    {
      name: 'wedged',
      intervalMs: 1,
      crashAfter: 3,
      tolerated: (err) => err === outage,
      run: async () => {
        const next = script[runs++];
        if (next) throw next;
        return 0;
      },
    },
    abort.signal,
    quiet,
  ).then(
    () => null,
    (err: unknown) => err,
  );
  assert.ok(crash instanceof WorkerCrash, 'the loop ended with a WorkerCrash');
  assert.equal(runs, 8, 'the third failure in a row after the success ends it');
  assert.equal((crash as WorkerCrash).cause, bug);
  assert.match((crash as WorkerCrash).message, /^wedged failed 3 runs in a row: Cannot read/);
});

test('without crashAfter a failing loop only backs off, and a supervised core crash fails the supervision', async () => {
  const abort = new AbortController();
  let runs = 0;
  const loop = runLoop({ name: 'patient', intervalMs: 1, run: async () => (runs++, Promise.reject(new Error('no'))) }, abort.signal, quiet);
  await waitFor('four failed runs', () => runs >= 4);
  abort.abort();
  await loop;
  const sup = superviseWorkers({ core: [{ name: 'core', intervalMs: 1, crashAfter: 2, run: async () => Promise.reject(new Error('stuck')) }], sidecar: [] }, quiet);
  await assert.rejects(sup.done, WorkerCrash);
});
