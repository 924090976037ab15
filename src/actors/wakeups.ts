import pg from 'pg';
import { APP_NAMES } from '../connection-budget.ts';
import type { Logger } from '../log.ts';
import { SWEEP_CHANNEL } from '../persistence/sweep-jobs.ts';
import { EVENTS_CHANNEL, type EventNotice } from '../durable/transition.ts';
import { AUDIT_OUTBOX_CHANNEL } from '../persistence/audit.ts';
import { bossNotifyChannel } from './boss.ts';

/**
 * Listens for the transition function's NOTIFY on a dedicated connection and wakes the workers a
 * new state concerns: READY or APPROVED -> the lease holder (`leaseHolder`), UNKNOWN -> recovery,
 * every notice to the lease holder's `notices` (its movement actors), and every state to `onEvent`
 * subscribers (the live inspection stream); a requested sweep run (its own channel) wakes that
 * sweep's pg-boss worker; a job inserted on a Ferry queue (pg-boss's channel, src/actors/boss.ts
 * "Waking") wakes one of that queue's workers; an audit outbox write (migration 0440) pokes the idle
 * audit promoter. The workers' intervals remain the safety net: a lost connection only costs
 * latency, and it reconnects with backoff.
 */
/** Reconnect backoff of the LISTEN connection: 1 s, doubling per failed attempt, at most 30 s. */
const RECONNECT_FIRST_MS = 1000;
const RECONNECT_MAX_MS = 30_000;

export interface WakeTargets {
  /** A node became READY or a movement APPROVED: there may be a movement to lease. */
  leaseHolder?: () => void;
  recovery?: () => void;
  /** Every notice of a committed payload, in order (the actor runtime's lease holder). */
  notices?: (notices: EventNotice[]) => void;
  /** A run of this sweep queue was requested (an operator's `ferry sweeps run`): fetch it now. */
  sweep?: (queue: string) => void;
  /** A job became ready on this pg-boss queue; null: on every queue (the connection came back). */
  queue?: (queue: string | null) => void;
  /** Rows were written to the audit outbox (and, with null on reconnect, may have been). */
  audit?: () => void;
}


export class Wakeups {
  #client: pg.Client | null = null;
  #stopped = false;
  #listeners = new Set<(e: EventNotice) => void>();
  #retry: NodeJS.Timeout | null = null;

  constructor(
    private readonly databaseUrl: string,
    private readonly targets: WakeTargets,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    await this.#connect(0);
  }

  onEvent(fn: (e: EventNotice) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  async #connect(attempt: number): Promise<void> {
    if (this.#stopped) return;
    const client = new pg.Client({ connectionString: this.databaseUrl, application_name: APP_NAMES.listen });
    const bossChannel = bossNotifyChannel();
    client.on('notification', (msg) => {
      if (msg.channel === SWEEP_CHANNEL) this.#sweep(msg.payload);
      else if (msg.channel === bossChannel) this.#queue(msg.payload);
      else if (msg.channel === AUDIT_OUTBOX_CHANNEL) this.targets.audit?.();
      else this.#dispatch(msg.payload);
    });
    client.on('error', (err) => {
      this.log.warn({ err }, 'wake-up connection lost; reconnecting');
      this.#reconnect(1);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
      if (this.targets.sweep) await client.query(`LISTEN ${SWEEP_CHANNEL}`);
      if (this.targets.queue) await client.query(`LISTEN ${bossChannel}`);
      if (this.targets.audit) await client.query(`LISTEN ${AUDIT_OUTBOX_CHANNEL}`);
      this.#client = client;
      // Anything that happened while we were not listening is found by the next interval run;
      // wake everyone once so it is found now.
      this.targets.leaseHolder?.();
      this.targets.queue?.(null);
      this.targets.audit?.();
    } catch (err) {
      await client.end().catch(() => {});
      this.log.warn({ err, attempt }, 'could not listen for wake-ups; retrying');
      this.#reconnect(attempt + 1);
    }
  }

  #reconnect(attempt: number) {
    if (this.#stopped || this.#retry) return;
    const old = this.#client;
    this.#client = null;
    old?.end().catch(() => {});
    this.#retry = setTimeout(() => {
      this.#retry = null;
      void this.#connect(attempt);
    }, Math.min(RECONNECT_FIRST_MS * 2 ** attempt, RECONNECT_MAX_MS));
  }

  /**
   * A payload is the array of notices one transaction committed, in order. Only the state an entity
   * was left in counts for waking workers: a node made READY and claimed in the same commit needs no
   * wake-up, and a movement's EXECUTING means a holder already has it.
   */
  #dispatch(payload: string | undefined) {
    if (!payload) return;
    let notices: EventNotice[];
    try {
      const parsed = JSON.parse(payload);
      notices = Array.isArray(parsed) ? parsed : [parsed];
    } catch {
      return;
    }
    const last = new Map<string, string>();
    for (const n of notices) last.set(n.entity === 'node' ? `n:${n.node_id}` : `r:${n.request_id}`, n.state);
    const states = new Set(last.values());
    if (states.has('READY') || states.has('APPROVED')) this.targets.leaseHolder?.();
    if (states.has('UNKNOWN')) this.targets.recovery?.();
    this.targets.notices?.(notices);
    for (const notice of notices) for (const fn of this.#listeners) fn(notice);
  }

  #queue(queue: string | undefined) {
    if (queue) this.targets.queue?.(queue);
  }

  #sweep(queue: string | undefined) {
    if (queue) this.targets.sweep?.(queue);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#retry) clearTimeout(this.#retry);
    await this.#client?.end().catch(() => {});
    this.#client = null;
  }
}
