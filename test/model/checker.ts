import { atBound, decode, encode, initialState, ModelViolation, successors, type ModelConfig, type State, type StepKind } from './system.ts';

/**
 * Exhaustive breadth-first exploration of the model's reachable states (system.ts), with state
 * hashing. In every state: S1 (no attempt submitted twice; at most one attempt of a node takes
 * effect), S4 (a COMPLETED movement has every node COMPLETED or SKIPPED), R1 (issue 24: an attempt
 * whose nonce was reclaimed before broadcast is never FAILED), and, per step, S2 (checked at every
 * effect), S4 (terminal rows never change) and S5 (log order and replay, per commit). On the graph:
 * L1, from every reachable state a state where the movement is terminal or waits for a person is
 * reachable by system steps alone (no fault, no person), the fair schedule.
 *
 * Breadth-first, so the trace printed for a violation is a shortest one.
 */

export interface CheckResult {
  states: number;
  transitions: number;
  /** Transitions that were faults (crash, stall, provider fault). */
  faultTransitions: number;
  /** Reachable states in which some fault had happened. */
  statesAfterFaults: number;
  maxDepth: number;
  ms: number;
  violation: { rule: string; message: string; trace: string[] } | null;
  /** Why exploration stopped early, if it did. */
  truncated?: string;
}

/** A movement state that is terminal or waits for a person (L1's goal). */
const SETTLED_OR_WAITING = new Set(['COMPLETED', 'REJECTED', 'EXPIRED', 'CANCELLED', 'FAILED', 'MANUAL_INTERVENTION', 'WAITING_MANUAL_ACTION', 'PENDING_APPROVAL']);

/** Invariants of one state; the rule and why when one fails. */
export function stateViolation(s: State, cfg: ModelConfig, ignore: ReadonlySet<string> = new Set()): { rule: string; message: string } | null {
  for (const [i, attempts] of s.att.entries()) {
    for (const [k, a] of attempts.entries()) {
      if (a.sub > 1) return { rule: 'S1', message: `node ${i} attempt ${k + 1} was submitted ${a.sub} times` };
    }
    const effective = attempts.map((a, k) => (a.eff ? k + 1 : 0)).filter((k) => k > 0);
    if (effective.length > 1) return { rule: 'S1', message: `node ${i} took effect under attempts ${effective.join(' and ')}: paid twice` };
  }
  if (s.m.s === 'COMPLETED' && !s.n.every((n) => n.s === 'COMPLETED' || n.s === 'SKIPPED')) {
    return { rule: 'S4', message: `movement COMPLETED with nodes ${s.n.map((n) => n.s).join(', ')}` };
  }
  if (cfg.lane === 'evm' && !ignore.has('R1')) {
    for (const [i, n] of s.n.entries()) {
      const a = n.a > 0 ? s.att[i][n.a - 1] : null;
      // FAILED on the provider's word about this attempt (submit or recover), not a later prepare's.
      if (n.s === 'FAILED' && a && a.res === 'reclaimed' && (n.err === 'EVM_NONCE_CONSUMED' || n.err === 'EVM_NONCE_RECLAIMED')) {
        return { rule: 'R1', message: `node ${i} is FAILED (${n.err}) for attempt ${n.a}, whose nonce the reaper reclaimed before any broadcast: the approved transfer is never paid` };
      }
    }
  }
  return null;
}

export function describeState(s: State): string {
  // n0=SUBMITTING#1 is node 0 in SUBMITTING at attempt 1; [leased, idle]: it has a lease, idle past its grace.
  // p0=claimed(n0#1, lease held): process 0 works on attempt 1 of node 0 and its lease is the row's.
  const nodes = s.n.map((n, i) => `n${i}=${n.s}#${n.a}${n.err ? `(${n.err})` : ''}${n.tok ? `[leased${n.stale ? ', idle' : ''}]` : ''}`).join(' ');
  const procs = s.p
    .map((p, i) => `p${i}=${p ? `${p.ph}(n${p.n}#${p.att}, lease ${s.n[p.n].tok === p.tok ? 'held' : 'lost'}${p.ans ? `, answer ${p.ans}` : ''})` : 'idle'}`)
    .join(' ');
  const prov = s.att
    .map((as, i) => as.map((a, k) => (a.sub || a.eff || (a.res && a.res !== 'none') ? `n${i}#${k + 1}:sub${a.sub}${a.eff ? ',paid' : ''}${a.res ? `,${a.res},${a.chain}` : ''}` : '')).filter(Boolean).join(' '))
    .filter(Boolean)
    .join(' ');
  return `movement=${s.m.s} ${nodes} | ${procs}${prov ? ` | provider ${prov}` : ''}`;
}

export interface CheckOptions {
  /** Stop (truncated) after this many states. */
  maxStates?: number;
  /** Skip the L1 graph check (saves the edge memory). */
  liveness?: boolean;
  /** State rules not checked in this run (e.g. R1, to see that S1 holds past a known R1 finding). */
  ignore?: string[];
}

export function check(cfg: ModelConfig, opts: CheckOptions = {}): CheckResult {
  // The durable transition function builds an error for every refused event; their stacks are
  // most of the cost of a step and never read here.
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return explore(cfg, opts);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

function explore(cfg: ModelConfig, opts: CheckOptions): CheckResult {
  const t0 = Date.now();
  const maxStates = opts.maxStates ?? 5_000_000;
  const liveness = opts.liveness ?? true;
  const ignore = new Set(opts.ignore ?? []);
  const ids = new Map<string, number>();
  const keys: string[] = [];
  const parent: number[] = [];
  const via: number[] = [];
  const depth: number[] = [];
  const faulted: boolean[] = [];
  const labels: string[] = [];
  const labelIds = new Map<string, number>();
  const labelId = (l: string) => {
    let id = labelIds.get(l);
    if (id === undefined) {
      id = labels.length;
      labels.push(l);
      labelIds.set(l, id);
    }
    return id;
  };
  // System edges, reversed, for L1.
  const revFrom: number[] = [];
  const revTo: number[] = [];
  let transitions = 0;
  let faultTransitions = 0;
  let maxDepth = 0;

  const trace = (id: number, last?: string): string[] => {
    const out: string[] = [];
    for (let x = id; x > 0; x = parent[x]) out.push(`${labels[via[x]]}\n      -> ${describeState(decode(keys[x]))}`);
    out.push(`start: ${describeState(decode(keys[0]))}`);
    out.reverse();
    if (last) out.push(last);
    return out.map((l, i) => `${String(i).padStart(3)}. ${l}`);
  };
  const result = (violation: CheckResult['violation'], truncated?: string): CheckResult => ({
    states: keys.length,
    transitions,
    faultTransitions,
    statesAfterFaults: faulted.filter(Boolean).length,
    maxDepth,
    ms: Date.now() - t0,
    violation,
    ...(truncated ? { truncated } : {}),
  });

  const start = initialState(cfg);
  const k0 = encode(start);
  ids.set(k0, 0);
  keys.push(k0);
  parent.push(-1);
  via.push(-1);
  depth.push(0);
  faulted.push(false);
  const bad0 = stateViolation(start, cfg, ignore);
  if (bad0) return result({ ...bad0, trace: trace(0) });

  for (let head = 0; head < keys.length; head++) {
    const s = decode(keys[head]);
    let steps: { label: string; kind: StepKind; next: State }[];
    try {
      steps = successors(s, cfg);
    } catch (err) {
      if (err instanceof ModelViolation) return result({ rule: err.rule, message: err.message, trace: trace(head, `(the next step violates ${err.rule})`) });
      throw err;
    }
    for (const step of steps) {
      transitions++;
      if (step.kind === 'fault') faultTransitions++;
      const k = encode(step.next);
      let id = ids.get(k);
      if (id === undefined) {
        id = keys.length;
        ids.set(k, id);
        keys.push(k);
        parent.push(head);
        via.push(labelId(step.label));
        depth.push(depth[head] + 1);
        faulted.push(step.next.f.some((x) => x > 0));
        maxDepth = Math.max(maxDepth, depth[head] + 1);
        const bad = stateViolation(step.next, cfg, ignore);
        if (bad) return result({ ...bad, trace: trace(id) });
        if (keys.length >= maxStates) return result(null, `stopped at ${maxStates} states`);
      }
      if (liveness && step.kind === 'system' && id !== head) {
        revFrom.push(id);
        revTo.push(head);
      }
    }
  }

  if (liveness) {
    // L1: backwards from the goal over system edges; a reachable state left out can never settle
    // without another fault or a person.
    const n = keys.length;
    const count = new Int32Array(n + 1);
    for (const f of revFrom) count[f + 1]++;
    for (let i = 0; i < n; i++) count[i + 1] += count[i];
    const adj = new Int32Array(revFrom.length);
    const fill = count.slice(0, n);
    for (let e = 0; e < revFrom.length; e++) adj[fill[revFrom[e]]++] = revTo[e];
    const good = new Uint8Array(n);
    const queue: number[] = [];
    for (let i = 0; i < n; i++) {
      const st = decode(keys[i]);
      if (SETTLED_OR_WAITING.has(st.m.s) || atBound(st, cfg)) {
        good[i] = 1;
        queue.push(i);
      }
    }
    for (let q = 0; q < queue.length; q++) {
      const x = queue[q];
      for (let e = count[x]; e < count[x + 1]; e++) {
        const y = adj[e];
        if (!good[y]) {
          good[y] = 1;
          queue.push(y);
        }
      }
    }
    for (let i = 0; i < n; i++) {
      if (!good[i]) {
        return result({
          rule: 'L1',
          message: 'from the last state no terminal or waiting-for-a-person state is reachable by system steps alone',
          trace: trace(i),
        });
      }
    }
  }
  return result(null);
}

export function formatResult(name: string, r: CheckResult): string {
  const head = `${name}: ${r.states} states, ${r.transitions} transitions (${r.faultTransitions} faults; ${r.statesAfterFaults} states after a fault), depth ${r.maxDepth}, ${r.ms} ms, violations: ${r.violation ? 1 : 0}${r.truncated ? ` (${r.truncated})` : ''}`;
  if (!r.violation) return head;
  return `${head}\n  ${r.violation.rule} violated: ${r.violation.message}\n  shortest trace:\n${r.violation.trace.map((l) => `  ${l}`).join('\n')}`;
}
