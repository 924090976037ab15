import type { PriceSource } from '../prices/price-source.ts';
import type { FerryConfig } from '../config.ts';
import { contextArtifactNodeIds, contextOfRows, type ContextInput } from '../executors/context.ts';
import type { ExecutionContext, PreparedAction } from '../executors/protocol.ts';
import { outcomeOf, resultArtifacts } from '../executors/records.ts';
import type { ExecutorRegistry, SignerRegistry } from '../executors/registry.ts';
import type { Logger } from '../log.ts';
import { infraCauseOf } from '../executors/infra.ts';
import type { InfraCause } from '../persistence/infra-errors.ts';
import type { ExecutorOutcome, OutcomeState } from '../machines/outcome.ts';
import { artifactsOfNodes, type NewArtifact } from '../persistence/artifacts.ts';
import type { ArtifactCache } from './artifact-cache.ts';
import type { Pool, Queryable } from '../persistence/db.ts';
import { nodesOfMovement, type NodeRow, type MovementRow } from '../persistence/movements.ts';
import type { GroupWriter } from './group-writer.ts';
import type { TransitionDeps } from '../durable/transition.ts';

// The executor answers' records, below the workers and the services alike (executors/records.ts).
export { errorOutcome, errorText, outcomeOf, resultArtifacts } from '../executors/records.ts';
export type { ContextInput } from '../executors/context.ts';

/** What the movement actors' dispatch and observation steps and recovery share. */
export interface WorkerDeps {
  pool: Pool;
  config: FerryConfig;
  executors: ExecutorRegistry;
  signers: SignerRegistry;
  transitions: TransitionDeps;
  log: Logger;
  /** The actor runtime's group writer: writes over held rows go through it, merged under load. */
  groupWriter?: GroupWriter;
  /** Where the treasury policy reads prices at dispatch; unset: the configuration's price_feeds (src/prices/). */
  prices?: PriceSource | null;
}

export const nowIso = () => new Date().toISOString();

/**
 * Builds the ExecutionContext of a claimed node from its movement, its sibling nodes and the
 * artifacts of its completed direct predecessors. `attemptNo` is the attempt the call belongs to.
 */
export async function contextFor(
  db: Queryable,
  movement: MovementRow,
  node: NodeRow,
  attemptNo: number,
): Promise<ExecutionContext> {
  const nodes = await nodesOfMovement(db, movement.id);
  return (await contextsFor(db, [{ movement, node, nodes, attemptNo }]))[0];
}

/**
 * contextFor for a batch of claimed nodes whose siblings are known: one artifacts query for all, or
 * none when a movement actor's cache (artifact-cache.ts) has the artifacts of the rows it holds.
 */
export async function contextsFor(db: Queryable, inputs: ContextInput[], cache?: ArtifactCache, unwritten: readonly NewArtifact[] = []): Promise<ExecutionContext[]> {
  if (cache) {
    const movements = new Map(inputs.map((i) => [i.movement.id, { movement: i.movement, nodes: i.nodes }]));
    const artifacts = [...(await cache.of(db, [...movements.values()])), ...unwritten];
    return inputs.map((input) => contextOfRows(input, artifacts));
  }
  const wanted = new Set(inputs.flatMap(contextArtifactNodeIds));
  const artifacts = [...(await artifactsOfNodes(db, [...wanted])), ...unwritten];
  return inputs.map((input) => contextOfRows(input, artifacts));
}


export interface ProviderAnswer {
  outcome: ExecutorOutcome;
  artifacts: NewArtifact[];
  retryAfter: number | null;
  /** Set when the call failed because Ferry's own database did: the caller defers, never records an outcome. */
  infra?: InfraCause;
  /** A new version of the submitted action that observe() proposes (fee bump), to sign and send. */
  replacement?: PreparedAction | null;
}

/**
 * Asks a node's executor about its current attempt (observe or recover for a claimed node; inspect,
 * read only, for reconciliation), with the context
 * built for it (or the error building it threw). A result whose next_state the call cannot produce
 * becomes UNKNOWN; Ferry's own database trouble sets `infra`; any other throw becomes whatever
 * `onError` decides.
 */
export async function askProvider(
  deps: WorkerDeps,
  node: NodeRow,
  ctx: ExecutionContext | { error: unknown },
  call: 'observe' | 'recover' | 'inspect',
  allowed: readonly OutcomeState[],
  onError: (err: unknown) => ExecutorOutcome,
): Promise<ProviderAnswer> {
  try {
    if ('error' in ctx) throw ctx.error;
    const executor = deps.executors.get(node.executor_binding as never);
    const result = await executor[call](ctx);
    return {
      outcome: outcomeOf(result, allowed, 'UNKNOWN'),
      artifacts: resultArtifacts(node, node.attempt_no, result),
      retryAfter: result.retry_after_seconds ?? null,
      replacement: call === 'observe' ? result.prepared_action : null,
    };
  } catch (err) {
    const infra = infraCauseOf(err);
    return { outcome: onError(err), artifacts: [], retryAfter: null, ...(infra ? { infra } : {}) };
  }
}

/** Contexts for claimed nodes, one artifacts query for all; a failed read is each node's error. */
export async function claimedContexts(
  db: Queryable,
  claims: { movement: MovementRow; node: NodeRow; nodes: NodeRow[]; unwritten?: { artifacts?: NewArtifact[] } }[],
  attemptOf: (node: NodeRow) => number,
  cache?: ArtifactCache,
): Promise<(ExecutionContext | { error: unknown })[]> {
  // Artifacts a claim's commit will store with it (a predecessor's result written with the claim).
  const unwritten = claims.flatMap((c) => c.unwritten?.artifacts ?? []);
  try {
    return await contextsFor(db, claims.map((c) => ({ movement: c.movement, node: c.node, nodes: c.nodes, attemptNo: attemptOf(c.node) })), cache, unwritten);
  } catch {
    // One bad node must not sink the batch: build them one by one to find whose context fails.
    return Promise.all(
      claims.map((c) =>
        contextsFor(db, [{ movement: c.movement, node: c.node, nodes: c.nodes, attemptNo: attemptOf(c.node) }], undefined, c.unwritten?.artifacts ?? []).then(
          (x) => x[0],
          (error: unknown) => ({ error }),
        ),
      ),
    );
  }
}

/**
 * The logger for lines about one node: every such line says which movement, node and attempt it is
 * about and which worker wrote it, so one movement's story can be filtered out of any log.
 */
export function nodeLog(
  deps: Pick<WorkerDeps, 'log'>,
  worker: 'dispatcher' | 'observer' | 'recovery',
  node: Pick<NodeRow, 'id' | 'request_id' | 'node_key' | 'attempt_no'>,
  attempt = node.attempt_no,
): Logger {
  return deps.log.child({ movement_id: node.request_id, node_id: node.id, node_key: node.node_key, worker, attempt });
}
