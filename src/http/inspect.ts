/**
 * The inspection API: what the visualizer, `ferry movements show|watch` and operators read.
 *
 *   GET /inspect/machines                 every machine, described from its own definition
 *   GET /inspect/movements?state=&limit=  newest movements, with per-state node counts
 *   GET /inspect/movements/{id}           request, nodes, plan DAG and the full transition history
 *   GET /inspect/movements/{id}/events    server-sent events: each transition as it commits
 *
 * Every route needs a token with 'read'. Tokens travel only in the Authorization header, never in a
 * URL: the visualizer reads the event stream with fetch() (which can send headers) instead of
 * EventSource (which cannot), so no token ends up in access logs, browser history or Referer headers.
 * An open stream checks its token again every FERRY_STREAM_TOKEN_RECHECK_SECONDS and ends when the
 * token no longer grants 'read'; one token holds at most FERRY_STREAM_MAX_PER_TOKEN streams.
 */
import { Hono } from 'hono';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import type { AnyStateMachine } from 'xstate';
import { toDirectedGraph, type DirectedGraphNode } from 'xstate/graph';
import { z } from 'zod';
import { Wakeups } from '../actors/wakeups.ts';
import type { EventNotice } from '../durable/transition.ts';
import { FerryError } from '../errors.ts';
import { log as rootLog, type Logger } from '../log.ts';
// Guards and actions are named as src/machines/introspect.ts names them, so a graph edge can be
// compared with the machine's own transition list field by field.
import { actionLabel, guardLabel } from '../machines/introspect.ts';
import { callbackMachine } from '../machines/callback-delivery-machine.ts';
import { credentialProposalMachine } from '../machines/credential-proposal-machine.ts';
import { nodeMachine } from '../machines/node-machine.ts';
import { movementMachine, movementStates } from '../machines/movement-machine.ts';
import { policyProposalMachine } from '../machines/policy-proposal-machine.ts';
import { proposalMachine as templateProposalMachine } from '../machines/template-proposal-machine.ts';
import type { Pool } from '../persistence/db.ts';
import { movementOverviews } from '../persistence/inspection.ts';
import { MAX_MOVEMENT_PAGE, nodesOfMovement, transitionsOfMovement, type NodeRow, type MovementRow } from '../persistence/movements.ts';
import { executorKeyOf } from '../plan/bindings.ts';
import { actorNames, movementActors } from './actor-names.ts';
import { authenticateToken } from '../persistence/tokens.ts';
import { authenticate, bearerToken, can, requirePermission, type AuthEnv } from './auth.ts';
import { validate, validationError } from './errors.ts';
import { requireMovement } from '../services/movements.ts';
import { pageCursor, pageLimit } from './query.ts';
import { audienceOf } from './v3/context.ts';
import { effectDisplay, effectView, inspectedMovementView, inspectedNodeView, movementOverviewView, transitionView, type Audience } from './views.ts';
import type { ExplorerUrls } from './explorer.ts';
import { EMPTY_CONFIG_FILE, type ConfigFile } from '../config-file.ts';
import { listSigners } from '../persistence/registry.ts';
import type { AuthThrottle } from './auth-throttle.ts';

// ---------------------------------------------------------------------------------------------
// Machines

export interface MachineStateView {
  key: string;
  initial: boolean;
  final: boolean;
}

export interface MachineEdgeView {
  id: string;
  source: string;
  target: string;
  event: string;
  guard: string | null;
  actions: string[];
}

export interface MachineView {
  id: string;
  version: string | null;
  initial: string | null;
  states: MachineStateView[];
  events: string[];
  /** One edge per target of every candidate transition, as toDirectedGraph lays them out. */
  graph: { nodes: MachineStateView[]; edges: MachineEdgeView[] };
}

/** The machines Ferry persists, in the order the visualizer lists them. */
export const inspectedMachines: AnyStateMachine[] = [movementMachine, nodeMachine, callbackMachine, templateProposalMachine, credentialProposalMachine, policyProposalMachine];

/** A state's key relative to the machine root ("A" or "A.B" for nested states). */
function stateKey(node: { path: string[] }): string {
  return node.path.join('.');
}

/** Describes a machine from its definition, with its transitions laid out by xstate's toDirectedGraph. */
export function describeMachine(machine: AnyStateMachine): MachineView {
  const initial = machine.root.initial?.target?.[0];
  const initialKey = initial ? stateKey(initial) : null;
  const nodes: MachineStateView[] = [];
  const edges: MachineEdgeView[] = [];
  const visit = (g: DirectedGraphNode) => {
    for (const child of g.children) {
      const key = stateKey(child.stateNode);
      nodes.push({ key, initial: key === initialKey, final: child.stateNode.type === 'final' });
      for (const e of child.edges) {
        edges.push({
          id: e.id,
          source: stateKey(e.source),
          target: stateKey(e.target),
          event: e.label.text,
          guard: guardLabel(e.transition.guard),
          actions: (e.transition.actions ?? []).map(actionLabel),
        });
      }
      visit(child);
    }
  };
  visit(toDirectedGraph(machine));
  return {
    id: machine.id,
    version: machine.version ?? null,
    initial: initialKey,
    states: nodes,
    events: [...machine.root.events].sort(),
    graph: { nodes, edges },
  };
}

// A cache of what the machine definitions (module constants) describe: the same for every app, never
// changed after it is filled, so it can be shared by the whole process.
let machineViews: MachineView[] | null = null;
function allMachineViews(): MachineView[] {
  machineViews ??= inspectedMachines.map(describeMachine);
  return machineViews;
}

// ---------------------------------------------------------------------------------------------
// Movements

export interface PlanView {
  nodes: Array<{ key: string; kind: string; action_type: string; executor_key: string | null; layer: number }>;
  edges: Array<{ from: string; to: string }>;
  initial_frontier: string[];
}

/**
 * The plan DAG: nodes in the compiled plan's topological order, edges from each node's
 * predecessors, and each node's layer (the longest path from a root), which is all a layered
 * drawing needs.
 */
export function planView(request: Pick<MovementRow, 'compiled_plan'>, nodes: NodeRow[]): PlanView {
  const compiled = request.compiled_plan as { nodes?: Array<{ node_key?: unknown }>; initial_frontier?: unknown };
  const byKey = new Map(nodes.map((n) => [n.node_key, n]));
  const compiledOrder = Array.isArray(compiled.nodes) ? compiled.nodes.map((n) => String(n.node_key)) : [];
  const order = [...compiledOrder.filter((k) => byKey.has(k)), ...nodes.map((n) => n.node_key).filter((k) => !compiledOrder.includes(k))];
  const edges = order.flatMap((k) => byKey.get(k)!.predecessor_keys.filter((p) => byKey.has(p)).map((p) => ({ from: p, to: k })));

  const layer = new Map<string, number>();
  const layerOf = (key: string, seen: Set<string>): number => {
    const known = layer.get(key);
    if (known !== undefined) return known;
    if (seen.has(key)) return 0; // a cycle cannot be stored, but a drawing must not hang on one
    seen.add(key);
    const preds = byKey.get(key)!.predecessor_keys.filter((p) => byKey.has(p));
    const l = preds.length === 0 ? 0 : 1 + Math.max(...preds.map((p) => layerOf(p, seen)));
    layer.set(key, l);
    return l;
  };
  const roots = order.filter((k) => byKey.get(k)!.predecessor_keys.length === 0);
  return {
    nodes: order.map((k) => {
      const n = byKey.get(k)!;
      return { key: k, kind: n.node_kind, action_type: n.action_type, executor_key: executorKeyOf(n.executor_binding), layer: layerOf(k, new Set()) };
    }),
    edges,
    initial_frontier: Array.isArray(compiled.initial_frontier) ? compiled.initial_frontier.map(String) : roots,
  };
}

/** Transitions returned with a movement; longer histories continue on the event stream. */
export const HISTORY_LIMIT = 5000;

/**
 * A movement as the visualizer draws it: the /v3 movement and nodes (with their machines beside
 * them), the plan DAG and the transitions, each in the views /v3 answers with.
 */
export async function movementDetail(pool: Pool, id: string, audience: Audience, config: InspectDeps['config'] = {}) {
  const request = await requireMovement(pool, id);
  const [nodes, history, signers] = await Promise.all([nodesOfMovement(pool, id), transitionsOfMovement(pool, id, 0, HISTORY_LIMIT + 1), listSigners(pool)]);
  const display = effectDisplay({ explorerUrls: config?.explorerUrls ?? {}, file: config?.file ?? EMPTY_CONFIG_FILE, evmMaxFeePerGasCapWei: config?.evmMaxFeePerGasCapWei }, signers);
  const complete = history.length <= HISTORY_LIMIT;
  const shown = history.slice(0, HISTORY_LIMIT);
  const names = await actorNames(pool, [...movementActors(request), ...shown.map((t) => t.actor)]);
  return {
    movement: inspectedMovementView(request, audience, names),
    nodes: nodes.map((n) => inspectedNodeView(n, display, request.intent)),
    plan: planView(request, nodes),
    effect: effectView(request, nodes, display),
    transitions: shown.map((t) => transitionView(t, names)),
    /** False when the history was cut at HISTORY_LIMIT; the event stream delivers the rest. */
    transitions_complete: complete,
  };
}

// ---------------------------------------------------------------------------------------------
// The live stream

/** Subscribes to committed-transition notices; resolves once notices are flowing (or being retried). */
export type SubscribeNotices = (fn: (notice: EventNotice) => void) => Promise<() => void>;

/**
 * One LISTEN connection per process for all open streams, opened with the first stream and closed
 * with the last, so an idle Ferry holds no extra connection. It is the runtime's own Wakeups
 * listener without wake targets: the same channel, reconnects and backoff.
 */
export function sharedNotices(databaseUrl: string, log: Logger): SubscribeNotices {
  let wakeups: Wakeups | null = null;
  let started: Promise<void> = Promise.resolve();
  let subscribers = 0;
  return async (fn) => {
    subscribers++;
    if (!wakeups) {
      wakeups = new Wakeups(databaseUrl, {}, log);
      started = wakeups.start();
    }
    const mine = wakeups;
    const off = mine.onEvent(fn);
    await started;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      off();
      if (--subscribers === 0 && wakeups === mine) {
        wakeups = null;
        void mine.stop();
      }
    };
  };
}

/**
 * The event streams open on one app: each stream's way to end itself and a promise of its end.
 * createApp makes one per app and ends it on the app's close, so two apps in one process (tests run
 * several) never count or end each other's streams.
 */
export class EventStreams {
  private readonly live = new Map<() => void, Promise<void>>();
  private ending = false;

  /** Streams open now (tests use it to see a disconnect cleaned up). */
  get size(): number {
    return this.live.size;
  }

  /** True once end() was called: the app is stopping and opens no more streams. */
  get closed(): boolean {
    return this.ending;
  }

  /** Registers an open stream by its `end`; returns what the stream calls once it has ended. */
  track(end: () => void): () => void {
    let finished!: () => void;
    this.live.set(end, new Promise<void>((resolve) => (finished = resolve)));
    return () => {
      this.live.delete(end);
      finished();
    };
  }

  /**
   * Ends every open stream and refuses new ones (clients reconnect with Last-Event-ID and lose
   * nothing). Called on shutdown, so an open browser tab does not hold the HTTP server's close for
   * its whole drain time.
   */
  async end(): Promise<void> {
    this.ending = true;
    const ending = [...this.live.entries()];
    for (const [end] of ending) end();
    await Promise.all(ending.map(([, done]) => done));
  }
}

export interface StreamOptions {
  /** A comment line after this much silence keeps proxies and browsers from dropping the stream. */
  heartbeatMs: number;
  /**
   * Re-read the log this often even without a notice: a notice lost while the LISTEN connection
   * was down costs only this much latency.
   */
  pollMs: number;
  /**
   * Ask `stillAllowed` this often whether the stream's token still grants 'read'; when it does not
   * (revoked, expired, role changed) the stream sends an `end` event and closes.
   */
  recheckMs: number;
}

const BATCH = 500;

/** Defaults of StreamOptions (tests pass shorter ones). */
export const STREAM_HEARTBEAT_MS = 15_000;
export const STREAM_POLL_MS = 5_000;
export const STREAM_RECHECK_MS = 15_000;
/** Open streams one token may hold in one process (FERRY_STREAM_MAX_PER_TOKEN). */
export const STREAM_MAX_PER_TOKEN = 4;
/** What a client that lost the stream waits before reconnecting (the SSE `retry` field). */
const STREAM_RETRY_MS = 2000;

/**
 * Streams the transitions of one movement with id > afterId until the client goes away.
 *
 * Ids as SSE ids are a sound resume point because every transition of a movement is written while
 * its request row is locked (the durable transition function locks the request first), so a
 * movement's transitions commit in id order and a reader never skips a smaller id that commits late.
 */
async function streamTransitions(
  stream: SSEStreamingApi,
  pool: Pool,
  movementId: string,
  afterId: number,
  subscribe: SubscribeNotices,
  streams: EventStreams,
  opts: StreamOptions,
  signal: AbortSignal,
  log: Logger,
  stillAllowed: () => Promise<boolean>,
): Promise<void> {
  let wake: (() => void) | null = null;
  const poke = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  let closed = false;
  const close = () => {
    closed = true;
    poke();
  };
  stream.onAbort(close);
  signal.addEventListener('abort', close, { once: true });

  const finished = streams.track(close);
  let unsubscribe: () => void = () => {};
  try {
    unsubscribe = await subscribe((n) => {
      if (n.request_id === movementId) poke();
    });
    await stream.writeSSE({ event: 'ready', data: JSON.stringify({ request_id: movementId, after: afterId }), retry: STREAM_RETRY_MS });
    let last = afterId;
    let lastWrite = Date.now();
    let lastCheck = Date.now();
    while (!closed && !stream.aborted) {
      if (Date.now() - lastCheck >= opts.recheckMs) {
        // Fails closed: a check that cannot be made ends the stream too (the client reconnects and
        // authenticates again).
        const allowed = await stillAllowed().catch(() => false);
        lastCheck = Date.now();
        if (!allowed) {
          if (!closed) await stream.writeSSE({ event: 'end', data: JSON.stringify({ reason: 'token_no_longer_valid' }) });
          break;
        }
      }
      const rows = await transitionsOfMovement(pool, movementId, last, BATCH);
      const names = await actorNames(pool, rows.map((r) => r.actor));
      for (const row of rows) {
        if (closed) break;
        await stream.writeSSE({ event: 'transition', id: String(row.id), data: JSON.stringify(transitionView(row, names)) });
        last = row.id;
        lastWrite = Date.now();
      }
      if (rows.length === BATCH) continue;
      const quiet = Date.now() - lastWrite;
      if (quiet >= opts.heartbeatMs) {
        await stream.write(': heartbeat\n\n');
        lastWrite = Date.now();
      }
      const waitMs = Math.min(
        opts.pollMs,
        Math.max(1, opts.heartbeatMs - (Date.now() - lastWrite)),
        Math.max(1, opts.recheckMs - (Date.now() - lastCheck)),
      );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          wake = null;
          resolve();
        }, waitMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
        if (closed) poke();
      });
    }
  } catch (err) {
    // The client reconnects with Last-Event-ID and loses nothing; a write to a closed stream ends here too.
    if (!closed) log.warn({ err, movement_id: movementId }, 'inspection event stream ended by an error');
  } finally {
    unsubscribe();
    await stream.close();
    finished();
  }
}

// ---------------------------------------------------------------------------------------------
// Routes

export interface InspectDeps {
  pool: Pool;
  authThrottle?: AuthThrottle;
  /** Where committed-transition notices come from; by default a LISTEN shared by all streams. */
  notices?: SubscribeNotices;
  /** Where the shared LISTEN connects; by default the pool's own database. */
  directDatabaseUrl?: string;
  stream?: Partial<StreamOptions>;
  /** The registry this app's streams join (createApp passes the app's own); by default one of these routes' own. */
  streams?: EventStreams;
  log?: Logger;
  /** FERRY_STREAM_TOKEN_RECHECK_SECONDS and FERRY_STREAM_MAX_PER_TOKEN; defaults without it. */
  config?: { streamTokenRecheckSeconds?: number; streamMaxPerToken?: number; explorerUrls?: ExplorerUrls; file?: ConfigFile; evmMaxFeePerGasCapWei?: string };
}

const listQuery = z.object({
  state: z
    .string()
    .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
    .pipe(z.array(z.enum(movementStates)).max(movementStates.length))
    .optional(),
  limit: pageLimit(MAX_MOVEMENT_PAGE, 50),
  cursor: pageCursor,
});

const eventsQuery = z.object({
  after: z.string().regex(/^\d{1,15}$/, 'after must be a transition id (a non-negative integer)').optional(),
});

function databaseUrlOf(pool: Pool): string {
  const url = pool.options.connectionString;
  if (!url) throw new Error('the pool has no connection string to listen with');
  return url;
}

export function inspectRoutes(deps: InspectDeps): Hono<AuthEnv> {
  const log = (deps.log ?? rootLog).child({ component: 'inspect' });
  const opts: StreamOptions = {
    heartbeatMs: deps.stream?.heartbeatMs ?? STREAM_HEARTBEAT_MS,
    pollMs: deps.stream?.pollMs ?? STREAM_POLL_MS,
    recheckMs: deps.stream?.recheckMs ?? (deps.config?.streamTokenRecheckSeconds ?? STREAM_RECHECK_MS / 1000) * 1000,
  };
  const maxPerToken = deps.config?.streamMaxPerToken ?? STREAM_MAX_PER_TOKEN;
  const streams = deps.streams ?? new EventStreams();
  // Open streams per token id in this process.
  const streamsOf = new Map<string, number>();
  let notices = deps.notices;
  const subscribe: SubscribeNotices = (fn) => {
    notices ??= sharedNotices(deps.directDatabaseUrl ?? databaseUrlOf(deps.pool), log);
    return notices(fn);
  };

  const app = new Hono<AuthEnv>();
  app.use('/inspect/*', authenticate(deps.pool, deps.authThrottle), requirePermission('read'));

  app.get('/inspect/machines', (c) => c.json({ machines: allMachineViews() }));

  app.get('/inspect/movements', validate('query', listQuery), async (c) => {
    const q = c.req.valid('query');
    const page = await movementOverviews(deps.pool, { states: q.state, limit: q.limit, cursor: q.cursor });
    const names = await actorNames(deps.pool, page.movements.flatMap(movementActors));
    return c.json({ movements: page.movements.map((m) => movementOverviewView(m, audienceOf(c), names)), next_cursor: page.nextCursor });
  });

  app.get('/inspect/movements/:id', async (c) => c.json(await movementDetail(deps.pool, c.req.param('id'), audienceOf(c), deps.config)));

  app.get('/inspect/movements/:id/events', validate('query', eventsQuery), async (c) => {
    const id = c.req.param('id');
    // A stopping app opens no stream that would hold its close (the client retries elsewhere or later).
    if (streams.closed) throw new FerryError('SERVICE_UNAVAILABLE', 'the server is stopping; reconnect shortly');
    await requireMovement(deps.pool, id);
    // A reconnecting client names the last event it saw; that wins over ?after=.
    const header = c.req.header('Last-Event-ID')?.trim();
    if (header !== undefined && !/^\d{1,15}$/.test(header)) {
      throw validationError('header', [{ path: 'last-event-id', message: 'must be a transition id (a non-negative integer)' }]);
    }
    const after = Number(header ?? c.req.valid('query').after ?? 0);
    const { tokenId } = c.get('principal');
    const held = streamsOf.get(tokenId) ?? 0;
    if (held >= maxPerToken) {
      throw new FerryError('TOO_MANY_STREAMS', `this token already holds ${held} open event streams (at most ${maxPerToken})`, {
        limit: maxPerToken,
      });
    }
    // Counted before the first await below, so concurrent opens cannot overshoot the cap.
    streamsOf.set(tokenId, held + 1);
    const release = () => {
      const n = (streamsOf.get(tokenId) ?? 1) - 1;
      if (n <= 0) streamsOf.delete(tokenId);
      else streamsOf.set(tokenId, n);
    };
    // The same check authenticate() made, run again against the token as it is now.
    const token = bearerToken(c.req.header('Authorization')) ?? '';
    const stillAllowed = async () => {
      const who = await authenticateToken(deps.pool, token);
      return who !== null && who.id === tokenId && can(who.role, 'read');
    };
    c.header('X-Accel-Buffering', 'no');
    try {
      return streamSSE(c, (stream) =>
        streamTransitions(stream, deps.pool, id, after, subscribe, streams, opts, c.req.raw.signal, log, stillAllowed).finally(release),
      );
    } catch (err) {
      release();
      throw err;
    }
  });

  return app;
}
