import { transition, type AnyStateMachine } from 'xstate';
import { Batch, movementContextFromRow, nodeContextFromRow, type Refusal } from '../../src/durable/transition.ts';
import { InvalidTransitionError, LeaseLostError } from '../../src/errors.ts';
import type { ExecutorOutcome } from '../../src/machines/outcome.ts';
import { MOVEMENT_MACHINE_ID, MOVEMENT_MACHINE_VERSION, movementMachine, type MovementEvent } from '../../src/machines/movement-machine.ts';
import { NODE_MACHINE_ID, NODE_MACHINE_VERSION, nodeMachine, type NodeEvent } from '../../src/machines/node-machine.ts';
import { summarizeNodes } from '../../src/machines/node-summary.ts';
import type { MovementRow, NodeRow } from '../../src/persistence/movements.ts';

/**
 * A model of Ferry's composed system for the exhaustive check (checker.ts): one movement whose plan
 * is a chain of nodes, the worker processes that claim, prepare, submit, observe and recover them,
 * the people who approve, reject, cancel and retry at any time, and a modelled provider. Faults
 * (bounded): a process dies between any two steps (losing what it held in memory, and a commit it
 * was making), a lease expires while its holder is alive (a stall) and another process takes over,
 * a provider refuses, loses a request, loses an answer, or answers twice.
 *
 * The durable state (the rows) is kept apart from each process's memory. Every change of the rows
 * goes through the REAL durable transition function: `Batch` of src/durable/transition.ts, which
 * rebuilds each row's snapshot, computes the next with XState's pure transition() on the real
 * machines of src/machines, applies the fence, the serial-per-request rule, the frontier, the
 * derived movement state and the carried-onward claim. Only its flush() (the SQL) is not run: the
 * model takes the rows the batch left.
 *
 * A process step is: read rows -> machine transition -> commit (fenced by the lease token) ->
 * effect (a call to the provider, which records submits per attempt key).
 *
 * Abstractions (so the state space is finite): times are one constant instant (and due), row
 * versions and observation counts are not part of the state (no behaviour depends on them; the
 * log's order is checked per commit instead), error details are dropped, lease tokens are
 * renamed to the smallest free name. A lease that "expires" is a row idle past its grace: the
 * `stale` flag, cleared by any write of the row.
 */

export const AT = '2030-01-01T00:00:00.000Z';
const PAST = '2029-01-01T00:00:00.000Z';
export const REQUESTER = 'principal:requester';
export const APPROVERS = ['principal:a', 'principal:b'];

export interface ModelConfig {
  /** Length of the plan's chain of nodes (1-3). */
  nodes: number;
  /** Worker processes (1-2). */
  processes: number;
  /** Attempts per node the model lets a person or recovery start (the bound on new attempts). */
  maxAttempts: number;
  quorum: 1 | 2;
  /** action: submit completes at once; observe: submit answers SUBMITTED and the observer polls. */
  style: 'action' | 'observe';
  /** sim: the provider is a ledger keyed by attempt; evm: a nonce per attempt, with the nonce reaper. */
  lane: 'sim' | 'evm';
  /** Whether the movement starts approved (saves states) or people approve it in the model. */
  startApproved: boolean;
  /** People act at any time: approve (and the requester tries to), reject, cancel, retry. */
  persons: boolean;
  faults: { crashes: number; stalls: number; provider: number };
  /**
   * The timing assumption Ferry's SUBMITTING grace stands for: a process that committed SUBMITTING
   * reaches the provider before its lease can expire. Off, the check looks at a stall there too.
   */
  submitWithinGrace: boolean;
  /** Planted bugs / switched-off fixes (all default to Ferry as it is). */
  bugs: {
    /** false: dispatcher writes carry no lease (the fence is switched off). */
    fenceWrites: boolean;
    /** true: recovery submits the attempt again instead of asking the provider. */
    recoveryResubmitsBlind: boolean;
    /** false: EVM recover() answers FAILED EVM_NONCE_CONSUMED before asking whether the reaper reclaimed the nonce. */
    nonceReclaimFix: boolean;
    /** false: a broadcast whose clearForBroadcast is refused (nonce reclaimed after the pre-submit check) records FAILED, not READY. */
    sendReclaimFix: boolean;
    /** true: no recovery at all (a liveness bug: a dispatch whose process died is never resumed). */
    noRecovery: boolean;
    /** true: a commit loses its last log row (the write and its log part ways). */
    dropLastLogRow: boolean;
  };
}

export const defaultConfig: ModelConfig = {
  nodes: 2,
  processes: 2,
  maxAttempts: 2,
  quorum: 1,
  style: 'action',
  lane: 'sim',
  startApproved: false,
  persons: true,
  faults: { crashes: 1, stalls: 1, provider: 1 },
  submitWithinGrace: true,
  bugs: { fenceWrites: true, recoveryResubmitsBlind: false, nonceReclaimFix: true, sendReclaimFix: true, noRecovery: false, dropLastLogRow: false },
};

export function config(over: Partial<Omit<ModelConfig, 'faults' | 'bugs'>> & { faults?: Partial<ModelConfig['faults']>; bugs?: Partial<ModelConfig['bugs']> } = {}): ModelConfig {
  return { ...defaultConfig, ...over, faults: { ...defaultConfig.faults, ...over.faults }, bugs: { ...defaultConfig.bugs, ...over.bugs } };
}

// ---------------------------------------------------------------------------------------------
// State

/** A node row, as far as the model keeps it. */
export interface NodeS {
  s: string;
  a: number;
  err: string | null;
  ps: string | null;
  man: boolean;
  tok: string | null;
  stale: boolean;
  started: boolean;
  after: boolean;
  observed: boolean;
}

export interface MovementS {
  s: string;
  ap: string[];
  st: 'pending' | 'approved' | 'rejected';
  by: string | null;
}

/** What a submit's answer will say when it reaches the process (null: it never does). */
export type Answer = 'COMPLETED' | 'SUBMITTED' | 'FAILED' | 'UNKNOWN';

/** A process's memory: the dispatch it holds. */
export interface ProcS {
  /** Node index. */
  n: number;
  tok: string;
  /** claimed (PREPARING), submitting (SUBMITTING committed), checked (EVM pre-submit check passed), sent (answer on its way). */
  ph: 'claimed' | 'submitting' | 'checked' | 'sent';
  /** The attempt this dispatch works on, fixed when it claimed (ctx.attempt_no = attempt_no + 1). */
  att: number;
  ans: Answer | null;
}

/** The provider's record of one attempt of one node. */
export interface AttemptS {
  /** submit() calls the provider received for this attempt key (EVM: first broadcasts of the attempt's bytes). */
  sub: number;
  /** The attempt took effect (money moved). */
  eff: boolean;
  /** EVM: the nonce reservation of the attempt. */
  res?: 'none' | 'reserved' | 'broadcast' | 'reclaimed';
  /** EVM: what the chain has at the attempt's nonce. */
  chain?: 'free' | 'pending' | 'mined' | 'filler';
  /** EVM: a filler for the reclaimed nonce waits to be mined. */
  fill?: boolean;
}

export interface State {
  m: MovementS;
  n: NodeS[];
  p: (ProcS | null)[];
  /** att[node][attempt - 1] */
  att: AttemptS[][];
  /** Faults used: crashes, stalls, provider faults. */
  f: [number, number, number];
}

export function initialState(cfg: ModelConfig): State {
  const m: MovementS = { s: 'PENDING_APPROVAL', ap: [], st: 'pending', by: null };
  const n: NodeS[] = Array.from({ length: cfg.nodes }, () => ({ s: 'BLOCKED', a: 0, err: null, ps: null, man: false, tok: null, stale: false, started: false, after: false, observed: false }));
  const att: AttemptS[][] = Array.from({ length: cfg.nodes }, () =>
    Array.from({ length: cfg.maxAttempts }, () => (cfg.lane === 'evm' ? { sub: 0, eff: false, res: 'none' as const, chain: 'free' as const, fill: false } : { sub: 0, eff: false })),
  );
  let s: State = { m, n, p: Array.from({ length: cfg.processes }, () => null), att, f: [0, 0, 0] };
  if (cfg.startApproved) {
    const r = commitOf(s, cfg, (b) => [b.movementEvent('m', approve(APPROVERS[0]), APPROVERS[0])]);
    if (cfg.quorum === 2) s = commitOf(r!.state, cfg, (b) => [b.movementEvent('m', approve(APPROVERS[1]), APPROVERS[1])])!.state;
    else s = r!.state;
  }
  return s;
}

export const encode = (s: State): string => JSON.stringify(s);
export const decode = (k: string): State => JSON.parse(k) as State;

// ---------------------------------------------------------------------------------------------
// Rows <-> state

const nodeId = (i: number) => `n${i}`;
const nodeKey = (i: number) => `k${i}`;

function nodeRow(cfg: ModelConfig, s: State, i: number): NodeRow {
  const n = s.n[i];
  return {
    id: nodeId(i),
    request_id: 'm',
    node_key: nodeKey(i),
    node_kind: 'action',
    action_type: cfg.lane === 'evm' ? 'evm.transfer' : 'sim.transfer',
    retryable: true,
    machine_id: NODE_MACHINE_ID,
    machine_version: NODE_MACHINE_VERSION,
    predecessor_keys: i > 0 ? [nodeKey(i - 1)] : [],
    successor_keys: i < cfg.nodes - 1 ? [nodeKey(i + 1)] : [],
    node_state: n.s,
    attempt_no: n.a,
    idempotency_key: n.a > 0 ? `${nodeId(i)}:${n.a}` : null,
    started_at: n.started ? new Date(AT) : null,
    provider_state: n.ps,
    provider_refs: {},
    provider_ref_id: null,
    next_observe_at: null,
    last_observed_at: n.observed ? new Date(AT) : null,
    observe_count: 0,
    dispatch_after: n.after ? new Date(PAST) : null,
    error_code: n.err,
    error_detail: null,
    manual_intervention_required: n.man,
    claim_token: n.tok,
    row_version: 0,
    config: {},
    timeout_policy: {},
  } as unknown as NodeRow;
}

function movementRow(cfg: ModelConfig, s: State): MovementRow {
  return {
    id: 'm',
    request_state: s.m.s,
    machine_id: MOVEMENT_MACHINE_ID,
    machine_version: MOVEMENT_MACHINE_VERSION,
    created_by: REQUESTER,
    approval_quorum: cfg.quorum,
    approvals: s.m.ap.map((by) => ({ by, at: AT })),
    approval_status: s.m.st,
    decided_by: s.m.by,
    expires_at: null,
    callback_url: null,
    current_frontier: [],
    row_version: 0,
  } as unknown as MovementRow;
}

function nodeFromRow(r: NodeRow, stale: boolean): NodeS {
  return {
    s: r.node_state,
    a: r.attempt_no,
    err: r.error_code,
    ps: r.provider_state,
    man: r.manual_intervention_required ?? false,
    tok: r.claim_token,
    stale,
    started: r.started_at !== null,
    after: r.dispatch_after !== null,
    observed: r.last_observed_at !== null,
  };
}

// ---------------------------------------------------------------------------------------------
// Commits through the real durable transition function

/** A violation found while taking a step (S4, S5 are checked per commit). */
export class ModelViolation extends Error {
  constructor(
    readonly rule: string,
    message: string,
  ) {
    super(`${rule}: ${message}`);
  }
}

export const isRefusal = (r: unknown): r is Refusal => r instanceof InvalidTransitionError || r instanceof LeaseLostError;

export interface Committed {
  state: State;
  results: unknown[];
  /** Node index and lease of a claim the commit carried onward. */
  claimed: { n: number; tok: string }[];
}

const FINAL_MOVEMENT = new Set(['COMPLETED', 'REJECTED', 'EXPIRED', 'CANCELLED']);
const FINAL_NODE = new Set(['COMPLETED', 'SKIPPED', 'CANCELLED']);

/**
 * One transaction: rows in, the real Batch, rows out. Null when it wrote nothing. Checks, for this
 * commit: S5 (every changed row has log rows, in order from its version, and replaying them from
 * the row as it was gives the row as written) and S4 (terminal rows never change).
 */
export function commitOf(
  s: State,
  cfg: ModelConfig,
  build: (b: Batch) => unknown[],
  opts: { claimUnblocked?: boolean; actor?: string; key?: string } = {},
): Committed | null {
  // A commit depends only on the rows and the events (and the lease a carried claim takes): the
  // same commit from the same rows is taken from the cache, its checks already made.
  const cacheKey = opts.key === undefined ? null : `${cfg.lane}|${cfg.quorum}|${cfg.bugs.dropLastLogRow}|${opts.key}|${opts.claimUnblocked ? freshToken(s) : ''}|${JSON.stringify(s.m)}|${JSON.stringify(s.n)}`;
  if (cacheKey !== null) {
    const hit = commitCache.get(cacheKey);
    if (hit !== undefined) return hit === null ? null : fromCache(s, hit);
  }
  const done = commitUncached(s, cfg, build, opts);
  if (cacheKey !== null) {
    if (commitCache.size >= COMMIT_CACHE_SIZE) commitCache.clear();
    commitCache.set(cacheKey, done === null ? null : { m: done.state.m, n: done.state.n, results: done.results.map((r) => (isRefusal(r) ? REFUSED : true)), claimed: done.claimed });
    if (done !== null) return fromCache(s, commitCache.get(cacheKey)!);
  }
  return done;
}

interface CachedCommit {
  m: MovementS;
  n: NodeS[];
  results: unknown[];
  claimed: { n: number; tok: string }[];
}

const COMMIT_CACHE_SIZE = 200_000;
const commitCache = new Map<string, CachedCommit | null>();
const REFUSED = new InvalidTransitionError(NODE_MACHINE_ID, 'cached', 'cached', 'cached');

function fromCache(s: State, c: CachedCommit): Committed {
  return {
    state: { m: { ...c.m, ap: [...c.m.ap] }, n: c.n.map((x) => ({ ...x })), p: s.p.map((x) => x && { ...x }), att: s.att.map((as) => as.map((a) => ({ ...a }))), f: [...s.f] },
    results: c.results,
    claimed: c.claimed,
  };
}

function commitUncached(
  s: State,
  cfg: ModelConfig,
  build: (b: Batch) => unknown[],
  opts: { claimUnblocked?: boolean; actor?: string },
): Committed | null {
  let fresh: string | null = null;
  const b = new Batch({
    actor: opts.actor ?? 'worker:model',
    deps: { callbacks: async () => undefined },
    claimUnblocked: opts.claimUnblocked
      ? () => {
          fresh = freshToken(s);
          return fresh;
        }
      : undefined,
  });
  const before = { m: movementRow(cfg, s), n: s.n.map((_, i) => nodeRow(cfg, s, i)) };
  b.load(before.m, before.n, null);
  const results = build(b);
  b.derive();
  b.carryOnward();
  if (b.transitions.length === 0) return null;
  if (cfg.bugs.dropLastLogRow) b.transitions.pop();

  checkLog(b, before);

  const after = b.movementRow('m');
  const next: State = {
    p: s.p.map((x) => x && { ...x }),
    att: s.att.map((as) => as.map((a) => ({ ...a }))),
    f: [...s.f],
    m: { s: after.request_state, ap: after.approvals.map((a) => a.by), st: after.approval_status, by: after.decided_by },
    n: s.n.map((old, i) => {
      const e = b.nodes.get(nodeId(i))!;
      return e.dirty ? nodeFromRow(e.row, false) : { ...old };
    }),
  };
  // S4: a terminal movement or node never changes again.
  if (FINAL_MOVEMENT.has(s.m.s) && JSON.stringify(next.m) !== JSON.stringify(s.m)) {
    throw new ModelViolation('S4', `movement left terminal ${s.m.s} for ${next.m.s}`);
  }
  s.n.forEach((old, i) => {
    if (FINAL_NODE.has(old.s) && (next.n[i].s !== old.s || next.n[i].a !== old.a)) throw new ModelViolation('S4', `node ${i} left terminal ${old.s} for ${next.n[i].s}`);
  });
  const claimed = b.claims.map((c) => ({ n: Number(c.nodeId.slice(1)), tok: c.lease }));
  return { state: next, results, claimed };
}

/** S5 for one commit: the log rows of each entity continue its version and replay to the row written. */
function checkLog(b: Batch, before: { m: MovementRow; n: NodeRow[] }) {
  const byEntity = new Map<string, typeof b.transitions>();
  for (const t of b.transitions) {
    const list = byEntity.get(t.row.entity_id) ?? [];
    list.push(t);
    byEntity.set(t.row.entity_id, list);
  }
  const check = (id: string, machine: AnyStateMachine, oldRow: { row_version: number }, oldValue: string, oldCtx: unknown, newRow: { row_version: number }, newValue: string, newCtx: unknown, dirty: boolean) => {
    const steps = byEntity.get(id) ?? [];
    const changed = oldValue !== newValue || JSON.stringify(oldCtx) !== JSON.stringify(newCtx);
    if (changed && steps.length === 0) throw new ModelViolation('S5', `${id} changed from ${oldValue} to ${newValue} without a log entry`);
    if (!dirty && steps.length > 0) throw new ModelViolation('S5', `${id} has log entries but its row was not written`);
    let snap = machine.resolveState({ value: oldValue, context: oldCtx } as never);
    steps.forEach((t, k) => {
      if (t.row.seq !== oldRow.row_version + k + 1) throw new ModelViolation('S5', `${id}: log entry ${k} has seq ${t.row.seq}, expected ${oldRow.row_version + k + 1}`);
      if (t.row.from_state !== String(snap.value)) throw new ModelViolation('S5', `${id}: logged from ${t.row.from_state}, replay is in ${String(snap.value)}`);
      const [nx] = transition(machine, snap, { ...t.row.event_payload, type: t.row.event_type } as never);
      if (nx === snap) throw new ModelViolation('S5', `${id}: replay refuses ${t.row.event_type} in ${String(snap.value)}`);
      if (String(nx.value) !== t.row.to_state) throw new ModelViolation('S5', `${id}: logged to ${t.row.to_state}, replay goes to ${String(nx.value)}`);
      snap = nx;
    });
    if (steps.length > 0 && newRow.row_version !== oldRow.row_version + steps.length) throw new ModelViolation('S5', `${id}: row version ${newRow.row_version} after ${steps.length} log entries from ${oldRow.row_version}`);
    if (String(snap.value) !== newValue || JSON.stringify(snap.context) !== JSON.stringify(newCtx)) {
      throw new ModelViolation('S5', `${id}: replaying the log gives ${String(snap.value)} ${JSON.stringify(snap.context)}, the row is ${newValue} ${JSON.stringify(newCtx)}`);
    }
  };
  const m = b.movements.get('m')!;
  check('m', movementMachine, before.m, before.m.request_state, movementContextFromRow(before.m), m.row, m.row.request_state, movementContextFromRow(m.row), m.dirty);
  for (const old of before.n) {
    const e = b.nodes.get(old.id)!;
    check(old.id, nodeMachine, old, old.node_state, nodeContextFromRow(old), e.row, e.row.node_state, nodeContextFromRow(e.row), e.dirty);
    // The lease column is not in the machine's context: it changes only with a logged transition.
    if (e.row.claim_token !== old.claim_token && !(byEntity.get(old.id)?.length)) throw new ModelViolation('S5', `${old.id}: lease changed without a log entry`);
  }
}

/** The smallest lease token no row and no process holds (tokens are compared only for equality). */
export function freshToken(s: State): string {
  const used = new Set<string>();
  for (const n of s.n) if (n.tok) used.add(n.tok);
  for (const p of s.p) if (p) used.add(p.tok);
  for (let k = 0; ; k++) if (!used.has(`t${k}`)) return `t${k}`;
}

// ---------------------------------------------------------------------------------------------
// Events

const approve = (by: string): MovementEvent => ({ type: 'APPROVE', by, at: AT });
const outcome = (nextState: ExecutorOutcome['nextState'], errorCode: string | null = null, providerState: string | null = null, manual = false): ExecutorOutcome => ({
  nextState,
  providerState,
  providerRefs: {},
  providerRefId: null,
  errorCode,
  errorDetail: null,
  ...(manual ? { manualInterventionRequired: true } : {}),
});

// ---------------------------------------------------------------------------------------------
// Steps

/** How a step counts for L1: a system step (fair), a fault, or a person's action. */
export type StepKind = 'system' | 'fault' | 'person';

export interface Step {
  label: string;
  kind: StepKind;
  next: State;
}

const IN_DISPATCH = new Set(['PREPARING', 'AWAITING_SIGNATURE', 'SUBMITTING']);
const RUNNING = new Set(['APPROVED', 'EXECUTING']);

/** Every step the system can take from `s` (violations of S1-S5 found on the way are thrown). */
export function successors(s: State, cfg: ModelConfig): Step[] {
  const out: Step[] = [];
  const add = (label: string, kind: StepKind, next: State | null | undefined) => {
    // Every next state is a fresh object (commitOf and clone copy), so renaming in place is safe.
    if (next) out.push({ label, kind, next: canonical(next) });
  };
  const clone = (): State => decode(encode(s));
  const fault = (t: State, k: 0 | 1 | 2) => {
    t.f = [...t.f] as State['f'];
    t.f[k]++;
    return t;
  };
  const canCrash = s.f[0] < cfg.faults.crashes;
  const canStall = s.f[1] < cfg.faults.stalls;
  const canProv = s.f[2] < cfg.faults.provider;

  // People, at any time.
  if (cfg.persons) {
    for (const by of [...APPROVERS.slice(0, cfg.quorum), REQUESTER]) {
      add(`${by} approves`, 'person', commitOf(s, cfg, (b) => [b.movementEvent('m', approve(by), by)], { actor: by, key: `approve ${by}` })?.state);
    }
    add('a person rejects', 'person', commitOf(s, cfg, (b) => [b.movementEvent('m', { type: 'REJECT', by: APPROVERS[0], at: AT }, APPROVERS[0])], { key: 'reject' })?.state);
    add('a person cancels', 'person', commitOf(s, cfg, (b) => [b.movementEvent('m', { type: 'CANCEL', by: REQUESTER, summary: summarizeNodes(s.n.map((_, i) => nodeRow(cfg, s, i))) }, REQUESTER)], { key: 'cancel' })?.state);
    s.n.forEach((n, i) => {
      if (n.s !== 'FAILED' || n.a >= cfg.maxAttempts) return;
      add(`a person retries node ${i}`, 'person', commitOf(s, cfg, (b) => {
        const r = b.nodeEvent({ nodeId: nodeId(i), event: { type: 'RETRY_REQUESTED' } }, APPROVERS[0]);
        if (isRefusal(r)) return [r];
        b.derive();
        return [r, b.movementEvent('m', { type: 'NODE_RETRIED', by: APPROVERS[0], nodeKey: nodeKey(i) }, APPROVERS[0])];
      }, { key: `retry ${i}` })?.state);
    });
  }

  // Time: a lease (a row in dispatch) goes idle past its grace. Free when no live process holds
  // it (its holder died); a stall fault when its holder is alive.
  s.n.forEach((n, i) => {
    if (!IN_DISPATCH.has(n.s) || n.stale) return;
    // The assumption: whoever committed SUBMITTING (fenced or not) reaches the provider within the grace.
    if (cfg.submitWithinGrace && cfg.lane === 'sim' && s.p.some((p) => p !== null && p.n === i && p.ph === 'submitting')) return;
    const holder = s.p.findIndex((p) => p !== null && p.n === i && p.tok === n.tok);
    const t = clone();
    t.n[i].stale = true;
    if (holder < 0) return add(`grace of node ${i} elapses`, 'system', t);
    if (canStall) add(`process ${holder} stalls: lease of node ${i} expires`, 'fault', fault(t, 1));
  });

  // EVM: the nonce reaper reclaims a reservation never cleared for broadcast, and fills it.
  if (cfg.lane === 'evm') {
    s.n.forEach((_, i) =>
      s.att[i].forEach((a, k) => {
        if (a.res === 'reserved') {
          const holder = s.p.findIndex((p) => p !== null && p.n === i && p.att === k + 1);
          const t = clone();
          t.att[i][k].res = 'reclaimed';
          t.att[i][k].fill = t.att[i][k].chain === 'free';
          if (holder < 0) add(`reaper reclaims nonce of node ${i} attempt ${k + 1}`, 'system', t);
          else if (canStall) add(`process ${holder} stalls: reaper reclaims nonce of node ${i} attempt ${k + 1}`, 'fault', fault(t, 1));
        }
        if (a.fill && a.chain === 'free') {
          const t = clone();
          t.att[i][k].chain = 'filler';
          t.att[i][k].fill = false;
          add(`filler mined at nonce of node ${i} attempt ${k + 1}`, 'system', t);
        }
        if (a.chain === 'pending') {
          const t = clone();
          t.att[i][k].chain = 'mined';
          t.att[i][k].eff = true;
          add(`chain mines node ${i} attempt ${k + 1}`, 'system', t);
        }
      }),
    );
  }

  s.p.forEach((p, pi) => {
    const P = `process ${pi}`;
    if (p === null) {
      idleSteps(s, cfg, pi, add, clone, fault, canProv);
      return;
    }
    if (canCrash) {
      const t = clone();
      t.p[pi] = null;
      add(`${P} dies (${p.ph}, node ${p.n})`, 'fault', fault(t, 0));
    }
    const fence = cfg.bugs.fenceWrites ? p.tok : undefined;
    const drop = (t: State) => {
      t.p[pi] = null;
      return t;
    };
    if (p.ph === 'claimed') {
      // Prepare (no side effect), then one commit: PREPARED -> SUBMITTING with the attempt started.
      const pre = clone();
      if (cfg.lane === 'evm') {
        // prepare() reserves the nonce of the attempt it prepares, in a transaction of its own.
        const a = pre.att[p.n][p.att - 1];
        if (a && a.res === 'none') a.res = 'reserved';
      }
      const r = commitOf(pre, cfg, (b) => [b.nodeEvent({ nodeId: nodeId(p.n), event: { type: 'PREPARED', signingRequired: false, at: AT }, fence }, 'worker:dispatcher')], { key: `prepared ${p.n} ${fence}` });
      const t = r ? r.state : drop(pre);
      if (r && !isRefusal(r.results[0]) && r.state.n[p.n].s === 'SUBMITTING') t.p[pi] = { ...p, ph: 'submitting' };
      else drop(t);
      add(`${P} prepares node ${p.n} attempt ${p.att}: ${r && !isRefusal(r.results[0]) ? 'SUBMITTING' : 'refused'}`, 'system', t);
      if (canProv) {
        const d = commitOf(s, cfg, (b) => [b.nodeEvent({ nodeId: nodeId(p.n), event: { type: 'DISPATCH_DEFERRED', errorCode: 'SIM_TEMPORARY', retryAt: PAST }, fence }, 'worker:dispatcher')], { key: `deferred ${p.n} ${fence}` });
        if (d) add(`${P} prepare of node ${p.n} deferred (provider)`, 'fault', fault(drop(d.state), 2));
        const f = commitOf(s, cfg, (b) => [b.nodeEvent({ nodeId: nodeId(p.n), event: { type: 'PREPARE_FAILED', errorCode: 'SIM_PREPARE_REFUSED' }, fence }, 'worker:dispatcher')], { key: `prepare failed ${p.n} ${fence}` });
        if (f) add(`${P} prepare of node ${p.n} refused (provider)`, 'fault', fault(drop(f.state), 2));
      }
      return;
    }
    if (p.ph === 'submitting' && cfg.lane === 'sim') {
      // submit(): no fence here (as in the dispatcher); the provider records it under the attempt key.
      checkApproved(s, cfg, p);
      const sent = (arrives: boolean, eff: boolean, ans: Answer | null) => {
        const t = clone();
        const a = t.att[p.n][p.att - 1];
        if (arrives) a.sub++;
        if (eff) a.eff = true;
        t.p[pi] = { ...p, ph: 'sent', ans };
        return t;
      };
      add(`${P} submits node ${p.n} attempt ${p.att}`, 'system', sent(true, true, cfg.style === 'action' ? 'COMPLETED' : 'SUBMITTED'));
      if (canProv) {
        add(`${P} submits node ${p.n} attempt ${p.att}: provider refuses`, 'fault', fault(sent(true, false, 'FAILED'), 2));
        add(`${P} submits node ${p.n} attempt ${p.att}: request lost`, 'fault', fault(sent(false, false, 'UNKNOWN'), 2));
        add(`${P} submits node ${p.n} attempt ${p.att}: answer lost`, 'fault', fault(sent(true, true, 'UNKNOWN'), 2));
      }
      return;
    }
    if (p.ph === 'submitting' && cfg.lane === 'evm') {
      // preSubmitCheck(): the attempt must still hold its nonce; else PRE_SUBMIT_CHECK_DEFERRED.
      const a = s.att[p.n][p.att - 1];
      if (a.res === 'reserved' || a.res === 'broadcast') {
        const t = clone();
        t.p[pi] = { ...p, ph: 'checked' };
        add(`${P} pre-submit check of node ${p.n} attempt ${p.att}: nonce held`, 'system', t);
      } else {
        const r = commitOf(s, cfg, (b) => [b.nodeEvent({ nodeId: nodeId(p.n), event: { type: 'PRE_SUBMIT_CHECK_DEFERRED', errorCode: 'PRE_SUBMIT_CHECK_TEMPORARY_ERROR', retryAt: PAST }, fence }, 'worker:dispatcher')], { key: `pre-submit deferred ${p.n} ${fence}` });
        add(`${P} pre-submit check of node ${p.n} attempt ${p.att}: nonce reclaimed, deferred`, 'system', drop(r ? r.state : clone()));
      }
      return;
    }
    if (p.ph === 'checked') {
      // send(): clearForBroadcast (refused for a reclaimed nonce: nothing sent, the node is deferred
      // to READY like a failed pre-submit check), then broadcast.
      const t = clone();
      const a = t.att[p.n][p.att - 1];
      if (a.res !== 'reserved' && a.res !== 'broadcast') {
        if (!cfg.bugs.sendReclaimFix) {
          t.p[pi] = { ...p, ph: 'sent', ans: 'FAILED' };
          add(`${P} clearForBroadcast of node ${p.n} attempt ${p.att} refused: FAILED EVM_NONCE_RECLAIMED`, 'system', t);
          return;
        }
        const r = commitOf(s, cfg, (b) => [b.nodeEvent({ nodeId: nodeId(p.n), event: { type: 'PRE_SUBMIT_CHECK_DEFERRED', errorCode: 'EVM_NONCE_RECLAIMED', retryAt: PAST }, fence }, 'worker:dispatcher')], { key: `send deferred ${p.n} ${fence}` });
        add(`${P} clearForBroadcast of node ${p.n} attempt ${p.att} refused: nothing sent, deferred to READY`, 'system', drop(r ? r.state : clone()));
        return;
      }
      // The first broadcast of the attempt's bytes is its submission (S2); later ones send the same
      // bytes again, which can never be a second payment.
      if (a.res === 'reserved') {
        checkApproved(s, cfg, p);
        a.sub++;
      }
      a.res = 'broadcast';
      if (a.chain === 'free') a.chain = 'pending';
      t.p[pi] = { ...p, ph: 'sent', ans: 'SUBMITTED' };
      add(`${P} broadcasts node ${p.n} attempt ${p.att}`, 'system', t);
      if (canProv) {
        const u = decode(encode(t));
        u.p[pi] = { ...p, ph: 'sent', ans: 'UNKNOWN' };
        add(`${P} broadcasts node ${p.n} attempt ${p.att}: answer lost`, 'fault', fault(u, 2));
      }
      return;
    }
    if (p.ph === 'sent') {
      // The answer arrives (perhaps late: everything else may have happened meanwhile) and is committed.
      const ans = p.ans!;
      const event: NodeEvent = {
        type: 'SUBMIT_RESULT',
        outcome: ans === 'FAILED' ? outcome('FAILED', cfg.lane === 'evm' ? 'EVM_NONCE_RECLAIMED' : 'SIM_REFUSED', 'rejected') : ans === 'UNKNOWN' ? outcome('UNKNOWN', 'SUBMIT_ERROR') : outcome(ans, null, ans.toLowerCase()),
        at: AT,
        nextObserveAt: null,
      };
      const once = (st: State) => commitOf(st, cfg, (b) => [b.nodeEvent({ nodeId: nodeId(p.n), event, fence }, 'worker:dispatcher')], { claimUnblocked: true, key: `answer ${p.n} ${fence} ${ans}` });
      const r = once(s);
      const t = r ? r.state : clone();
      t.p[pi] = r?.claimed[0] ? claimOf(t, r.claimed[0]) : null;
      add(`${P} records answer ${ans} for node ${p.n} attempt ${p.att}${r ? '' : ' (refused)'}${r?.claimed[0] ? `, carries node ${r.claimed[0].n} onward` : ''}`, 'system', t);
      if (canProv) {
        // The provider answers twice: the second delivery is committed again.
        const r2 = once(t);
        if (r2) add(`${P} records answer ${ans} for node ${p.n} twice`, 'fault', fault(r2.state, 2));
      }
    }
  });
  return out;
}

/** A state at the model's bound: a node READY for an attempt beyond maxAttempts (exploration stops there). */
export function atBound(s: State, cfg: ModelConfig): boolean {
  return s.n.some((n) => n.s === 'READY' && n.a >= cfg.maxAttempts);
}

function claimOf(t: State, c: { n: number; tok: string }): ProcS {
  return { n: c.n, tok: c.tok, ph: 'claimed', att: t.n[c.n].a + 1, ans: null };
}

/**
 * S2 at the moment of an effect: the movement is approved, by enough principals other than its
 * requester. (Not whether it has ended since: a person may cancel a movement in MANUAL_INTERVENTION
 * with an attempt in flight, and that attempt may still reach the provider; see docs/design.md.)
 */
function checkApproved(s: State, cfg: ModelConfig, p: ProcS) {
  const distinct = new Set(s.m.ap);
  const ok = s.m.st === 'approved' && !distinct.has(REQUESTER) && distinct.size === s.m.ap.length && distinct.size >= cfg.quorum;
  if (!ok) throw new ModelViolation('S2', `node ${p.n} attempt ${p.att} submitted while the movement is ${s.m.s} (${s.m.st}, approvals ${JSON.stringify(s.m.ap)})`);
}

function idleSteps(
  s: State,
  cfg: ModelConfig,
  pi: number,
  add: (label: string, kind: StepKind, next: State | null | undefined) => void,
  clone: () => State,
  fault: (t: State, k: 0 | 1 | 2) => State,
  canProv: boolean,
) {
  const P = `process ${pi}`;
  // Dispatch claim: a READY node of an APPROVED/EXECUTING movement with nothing else in dispatch.
  s.n.forEach((n, i) => {
    if (n.s !== 'READY' || !RUNNING.has(s.m.s) || s.n.some((x) => IN_DISPATCH.has(x.s))) return;
    if (s.n.findIndex((x) => x.s === 'READY') !== i) return;
    // The bound on attempts: a node that used them all is not dispatched again (see atBound).
    if (n.a >= cfg.maxAttempts) return;
    const tok = freshToken(s);
    const r = commitOf(s, cfg, (b) => [
      ...(s.m.s === 'APPROVED' ? [b.movementEvent('m', { type: 'DISPATCH_STARTED' }, 'worker:dispatcher')] : []),
      b.nodeEvent({ nodeId: nodeId(i), event: { type: 'DISPATCH_CLAIMED', at: AT }, lease: tok }, 'worker:dispatcher'),
    ], { key: `claim ${i} ${tok}` });
    if (!r || isRefusal(r.results.at(-1))) return;
    r.state.p[pi] = { n: i, tok, ph: 'claimed', att: n.a + 1, ans: null };
    add(`${P} claims node ${i}`, 'system', r.state);
  });
  if (s.m.s !== 'EXECUTING') return;
  s.n.forEach((n, i) => {
    if (cfg.bugs.noRecovery && (n.s === 'PREPARING' || n.s === 'AWAITING_SIGNATURE' || n.s === 'SUBMITTING' || n.s === 'UNKNOWN')) return;
    // Recovery releases an abandoned dispatch (nothing was submitted before SUBMITTING).
    if ((n.s === 'PREPARING' || n.s === 'AWAITING_SIGNATURE') && n.stale) {
      const r = commitOf(s, cfg, (b) => [b.nodeEvent({ nodeId: nodeId(i), event: { type: 'DISPATCH_DEFERRED', errorCode: 'DISPATCH_ABANDONED', retryAt: AT } }, 'worker:recovery')], { key: `release ${i}` });
      add(`${P} recovery releases node ${i}`, 'system', r?.state);
    }
    // Recovery: SUBMITTING past grace, or UNKNOWN: asks the provider (recover()), never submits.
    if ((n.s === 'SUBMITTING' && n.stale) || n.s === 'UNKNOWN') {
      for (const [label, kind, o, eff] of recoverAnswers(s, cfg, i, canProv)) {
        const t = clone();
        if (eff) eff(t);
        const r = commitOf(t, cfg, (b) => [b.nodeEvent({ nodeId: nodeId(i), event: { type: 'RECOVERED', outcome: o, at: AT, nextObserveAt: null } }, 'worker:recovery')], { key: `recover ${i} ${label}` });
        add(`${P} recovery of node ${i} attempt ${n.a}: ${label}`, kind, kind === 'fault' ? fault(r ? r.state : t, 2) : r ? r.state : t);
      }
    }
    // Observer: asks about SUBMITTED / OBSERVING; its commit carries a successor onward.
    if (n.s === 'SUBMITTED' || n.s === 'OBSERVING') {
      const a = s.att[i][n.a - 1];
      const done = cfg.lane === 'evm' ? a.chain === 'mined' : a.eff;
      if (!done) return;
      const r = commitOf(s, cfg, (b) => [b.nodeEvent({ nodeId: nodeId(i), event: { type: 'OBSERVED', outcome: outcome('COMPLETED', null, 'completed'), at: AT, nextObserveAt: null } }, 'worker:observer')], { claimUnblocked: true, key: `observe ${i}` });
      if (!r) return;
      r.state.p[pi] = r.claimed[0] ? claimOf(r.state, r.claimed[0]) : null;
      add(`${P} observes node ${i} attempt ${n.a}: COMPLETED`, 'system', r.state);
    }
  });
}

type RecoverAnswer = [string, StepKind, ExecutorOutcome, ((t: State) => void) | null];

/** What recover() answers about a node's current attempt (and what asking does at the provider). */
function recoverAnswers(s: State, cfg: ModelConfig, i: number, canProv: boolean): RecoverAnswer[] {
  const n = s.n[i];
  const k = n.a - 1;
  const a = s.att[i][k];
  const out: RecoverAnswer[] = [];
  if (canProv) out.push(['provider does not answer: UNKNOWN', 'fault', outcome('UNKNOWN', 'RECOVER_ERROR'), null]);
  if (cfg.bugs.recoveryResubmitsBlind) {
    out.push(['resubmits blind', 'system', outcome(cfg.style === 'action' ? 'COMPLETED' : 'SUBMITTED', null, 'resubmitted'), (t) => {
      t.att[i][k].sub++;
      t.att[i][k].eff = true;
    }]);
    return out;
  }
  if (cfg.lane === 'sim') {
    // The ledger is authoritative: the attempt went out, or it never arrived.
    if (!a.eff && a.sub > 0) out.push(['provider refused it: FAILED', 'system', outcome('FAILED', 'SIM_REFUSED', 'rejected'), null]);
    else if (a.eff) out.push(['provider has it: ' + (cfg.style === 'action' ? 'COMPLETED' : 'SUBMITTED'), 'system', outcome(cfg.style === 'action' ? 'COMPLETED' : 'SUBMITTED', null, 'found'), null]);
    else out.push(['provider has no record: READY', 'system', outcome('READY', 'RECOVERY_NO_SUBMISSION'), null]);
    return out;
  }
  // EVM recover() (tx-lifecycle.ts): status first, then (fix) the reclaim, then re-send the stored bytes.
  const reclaimedBeforeBroadcast = a.res === 'reclaimed';
  if (a.chain === 'mined') out.push(['chain has it mined: COMPLETED', 'system', outcome('COMPLETED', null, 'mined'), null]);
  else if (a.chain === 'pending') out.push(['chain has it pending: SUBMITTED', 'system', outcome('SUBMITTED', null, 'pending'), null]);
  else if (a.chain === 'filler') {
    if (cfg.bugs.nonceReclaimFix && reclaimedBeforeBroadcast) out.push(['nonce used by a filler, reclaimed before broadcast: READY', 'system', outcome('READY', 'EVM_NONCE_RECLAIMED'), null]);
    else out.push(['nonce used by another transaction: FAILED EVM_NONCE_CONSUMED', 'system', outcome('FAILED', 'EVM_NONCE_CONSUMED'), null]);
  } else if (a.res === 'reserved' || a.res === 'broadcast') {
    out.push(['nothing on chain, nonce held: sends the stored bytes again, SUBMITTED', 'system', outcome('SUBMITTED', null, 'rebroadcast'), (t) => {
      const x = t.att[i][k];
      if (x.res === 'reserved') {
        checkApproved(t, cfg, { n: i, tok: '', ph: 'checked', att: n.a, ans: null });
        x.sub++;
      }
      x.res = 'broadcast';
      x.chain = 'pending';
    }]);
  } else out.push(['nonce reclaimed, never broadcast: READY', 'system', outcome('READY', 'EVM_NONCE_RECLAIMED'), null]);
  return out;
}

/** Renames lease tokens in order of first appearance, so states that differ only in names are one. */
function canonical(s: State): State {
  const names = new Map<string, string>();
  const rename = (t: string | null) => {
    if (t === null) return null;
    if (!names.has(t)) names.set(t, `t${names.size}`);
    return names.get(t)!;
  };
  for (const n of s.n) n.tok = rename(n.tok);
  for (const p of s.p) if (p) p.tok = rename(p.tok)!;
  return s;
}
