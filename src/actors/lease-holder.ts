import type { Logger } from '../log.ts';
import { leasedTotal } from '../metrics.ts';
import { acquireLeases, releaseLeases, renewLeases } from '../persistence/leases.ts';
import { ArtifactCache } from './artifact-cache.ts';
import type { WorkerDeps } from './execution.ts';
import { startMovementActor, type MovementActor, type MovementActorState } from './movement-actor.ts';
import { nextWorkAt } from '../durable/transition.ts';
import type { EventNotice } from '../durable/transition.ts';

/**
 * The lease holder of one process (docs/actor-runtime.md): it leases movements
 * that have due work (persistence/leases.ts), runs each as a movement actor (movement-actor.ts),
 * renews all its leases in one statement on its own timer, and hands a movement back when its actor
 * stops (nothing due soon, the movement settled, a node it does not own in dispatch).
 *
 * - Acquiring is its run (a core-group loop of the supervisor): woken by an approval's NOTIFY, by
 *   a movement it handed back coming due, and on its interval; it takes at most `maxMovements`.
 * - A NOTIFY about a movement it holds carries the movement's write_version after that commit. One
 *   newer than the actor's rows (an outside event: a cancel, a resolution, a retry) pokes a waiting
 *   actor to read its rows again at once; one its rows already have (the echo of its own write)
 *   changes nothing. A stepping actor compares at its next step, or learns of it at its next write,
 *   which the fence refuses.
 * - A renewal that does not return a movement means the lease is lost (expired and taken): its
 *   actor stops after its current step, whose writes the fence refuses.
 * - `stop()` (SIGTERM) lets every actor finish its current step, then hands back every lease in one
 *   statement, so another process takes the movements at once instead of after the expiry.
 */
export interface LeaseHolderOptions {
  owner: string;
  ttlSeconds: number;
  maxMovements: number;
  /** How long an actor waits in memory for its next due work before it hands the movement back. */
  holdMs: number;
  log: Logger;
}

interface Held {
  actor: MovementActor;
  state: MovementActorState;
  lost: boolean;
  done: Promise<void>;
}

export class LeaseHolder {
  readonly #held = new Map<string, Held>();
  #stopping = false;
  #renewTimer: NodeJS.Timeout | null = null;
  #dueTimer: NodeJS.Timeout | null = null;
  #dueAt = Infinity;
  #wake: () => void = () => {};
  readonly #handedBackAtStop: string[] = [];

  constructor(
    private readonly deps: WorkerDeps,
    private readonly opts: LeaseHolderOptions,
  ) {}

  /** The movements with a live actor here. */
  get movementIds(): string[] {
    return [...this.#held.keys()];
  }

  /** Where the holder asks for its next acquisition (the loop's waker). */
  onWake(fn: () => void): void {
    this.#wake = fn;
  }

  start(): void {
    const every = Math.max(250, (this.opts.ttlSeconds * 1000) / 3);
    this.#renewTimer = setInterval(() => void this.#renew(), every);
    this.#renewTimer.unref();
  }

  /**
   * One acquisition: leases what is due (up to the cap) and starts an actor for each. Returns how
   * many it leased when that filled its room (more may be due: the loop goes again at once), else 0
   * (nothing more is due now: the loop sleeps until woken), so an acquisition is never followed by
   * an empty one.
   */
  async acquire(): Promise<number> {
    if (this.#stopping) return 0;
    const room = this.opts.maxMovements - this.#held.size;
    if (room <= 0) return 0;
    const leased = await acquireLeases(this.deps.pool, this.opts.owner, this.opts.ttlSeconds, room);
    for (const { noArtifacts, ...m } of leased) {
      const artifacts = new ArtifactCache();
      // A movement whose nodes hold no artifact yet (a fresh one) needs no read of them.
      if (noArtifacts) artifacts.knownEmpty(m);
      this.#run({ movementId: m.movement.id, held: m, refusedSteps: 0, artifacts });
    }
    leasedTotal.inc(leased.length);
    return leased.length >= room ? leased.length : 0;
  }

  /** Notices of committed transitions (wakeups.ts): outside events reach the actors they concern. */
  notice(notices: EventNotice[]): void {
    for (const n of notices) {
      const h = this.#held.get(n.request_id);
      if (!h) continue;
      if (n.write_version !== undefined) {
        // Compared with the actor's rows when its next step starts (movement-actor.ts): the notice of
        // the actor's own write may arrive before that write's answer does. A waiting actor whose rows
        // are older than the notice is poked; one whose rows already are at it has nothing to learn.
        h.state.noticed = Math.max(h.state.noticed ?? 0, n.write_version);
        if (!h.state.held || n.write_version > Number(h.state.held.movement.write_version)) h.actor.send({ type: 'POKE' });
        continue;
      }
      // A writer older than the versioned notices: compare the states it tells with the actor's rows.
      const rows = h.state.held;
      const echo =
        rows !== null &&
        (n.entity === 'request' ? rows.movement.request_state === n.state : rows.nodes.some((x) => x.id === n.node_id && x.node_state === n.state));
      if (echo) continue;
      // Read again at the start of the next step (a step in flight keeps its rows: its write is fenced).
      h.state.stale = true;
      h.actor.send({ type: 'POKE' });
    }
  }

  #run(state: MovementActorState): void {
    let settle!: () => void;
    const done = new Promise<void>((r) => (settle = r));
    const entry: Held = { state, lost: false, done, actor: null as unknown as MovementActor };
    this.#held.set(state.movementId, entry);
    entry.actor = startMovementActor(this.deps, state, {
      holdMs: this.opts.holdMs,
      stopping: () => this.#stopping || entry.lost,
      onDone: (reason) => {
        void this.#handBack(state, entry.lost, reason).finally(settle);
      },
    });
  }

  async #handBack(state: MovementActorState, lost: boolean, reason: string): Promise<void> {
    const log = this.opts.log.child({ movement_id: state.movementId, worker: 'lease_holder' });
    // At stop every lease goes back in one statement (stop()).
    if (this.#stopping) {
      if (!lost) this.#handedBackAtStop.push(state.movementId);
      this.#held.delete(state.movementId);
      return;
    }
    // A write that ended the movement cleared its lease already (group-commit.ts): nothing to hand back.
    const ended = state.held !== null && state.held.movement.request_state !== 'APPROVED' && state.held.movement.request_state !== 'EXECUTING';
    try {
      if (!lost && !ended) await releaseLeases(this.deps.pool, this.opts.owner, [state.movementId]);
      log.debug({ reason }, 'movement handed back');
    } catch (err) {
      // The lease expires on its own; another holder takes the movement then.
      log.warn({ err, reason }, 'could not hand a movement back; its lease will expire');
    } finally {
      this.#held.delete(state.movementId);
    }
    if (this.#stopping) return;
    // Due again later (an observation a while off): ask to be woken then, not only on the interval.
    const next = state.held ? nextWorkAt(state.held.movement, state.held.nodes) : null;
    if (next) this.#wakeAt(new Date(next).getTime());
    if (reason === 'nothing due' || reason === 'next work later' || reason.startsWith('movement ')) this.#wake();
  }

  #wakeAt(at: number): void {
    if (at >= this.#dueAt) return;
    if (this.#dueTimer) clearTimeout(this.#dueTimer);
    this.#dueAt = at;
    this.#dueTimer = setTimeout(() => {
      this.#dueTimer = null;
      this.#dueAt = Infinity;
      this.#wake();
    }, Math.max(0, at - Date.now()));
    this.#dueTimer.unref();
  }

  async #renew(): Promise<void> {
    const ids = [...this.#held.keys()];
    if (ids.length === 0 || this.#stopping) return;
    try {
      const { kept, ended } = await renewLeases(this.deps.pool, this.opts.owner, ids, this.opts.ttlSeconds);
      for (const id of ids) {
        const h = this.#held.get(id);
        // Ended: the actor's own last write (or an operator's) ended the movement, and its lease
        // went with it. That is not a loss; the actor stops on the state it reads.
        if (!h || kept.has(id) || ended.has(id)) continue;
        h.lost = true;
        this.opts.log.warn({ movement_id: id, worker: 'lease_holder' }, 'lease lost; the movement actor stops');
        h.actor.send({ type: 'LEASE_LOST' });
      }
    } catch (err) {
      // The next renewal tries again; a lease that expires meanwhile is lost, and its writes refused.
      this.opts.log.warn({ err, worker: 'lease_holder' }, 'lease renewal failed');
    }
  }

  /** Stops acquiring, lets every actor finish its current step, and hands back every lease. */
  async stop(): Promise<void> {
    this.#stopping = true;
    if (this.#renewTimer) clearInterval(this.#renewTimer);
    if (this.#dueTimer) clearTimeout(this.#dueTimer);
    const running = [...this.#held.values()];
    for (const h of running) h.actor.send({ type: 'STOP' });
    await Promise.all(running.map((h) => h.done));
    const ids = this.#handedBackAtStop.splice(0);
    try {
      await releaseLeases(this.deps.pool, this.opts.owner, ids);
    } catch (err) {
      this.opts.log.warn({ err, worker: 'lease_holder', movements: ids.length }, 'could not hand the leases back at stop; they expire on their own');
    }
  }
}
