import { ValidationError } from '../errors.ts';
import { CURSOR_AT_SQL, decodeCursor, isUuid, pageOfRows } from './cursor.ts';
import type { Queryable } from './db.ts';

/**
 * SQL for movements and their nodes. State columns are written only by the durable
 * transition function's batched write (group-commit.ts), after the machines have decided.
 */

/** A movement_requests row: the columns insertMovement writes (NewMovement), as read back, and those the database fills. */
export interface MovementRow extends Omit<NewMovement, 'intent' | 'input_params' | 'compiled_plan' | 'expires_at'> {
  id: string;
  intent: Record<string, unknown>;
  input_params: Record<string, unknown>;
  compiled_plan: Record<string, unknown>;
  row_version: number;
  /** The movement's write fence (migration 0200, see persistence/group-commit.ts). */
  write_version: number;
  /** The actor runtime's lease (migration 0201, persistence/leases.ts): holder, epoch, expiry. */
  lease_owner?: string | null;
  lease_epoch?: number;
  lease_expires_at?: Date | null;
  /** When the movement next has due work (migration 0201); null when none. */
  next_work_at?: Date | null;
  approval_status: 'pending' | 'approved' | 'rejected';
  approvals: { by: string; at: string }[];
  decided_by: string | null;
  expires_at: Date | null;
  current_frontier: string[];
  /** What the movement recorded of the treasury policy at its creation (migration 0250); null before. */
  policy_rule_set_version?: number | null;
  policy_rule_id?: string | null;
  policy_action?: string | null;
  policy_asset?: string | null;
  policy_amount?: string | null;
  policy_destination?: string | null;
  policy_destination_entry?: string | null;
  policy_approvers?: { principals: string[] } | null;
  /** The sources its nodes move funds from, as the policy read them (migration 0390); null before. */
  policy_sources?: string[] | null;
  /** Whether its destination asked for node callbacks (migration 0350); false for a raw callback_url. */
  node_callbacks?: boolean;
  created_at: Date;
  updated_at: Date;
}

/** A request_nodes row: the columns insertNodes writes (NewNode), as read back, and those the runtime fills later. */
export interface NodeRow extends Omit<NewNode, 'config' | 'timeout_policy'> {
  id: string;
  request_id: string;
  config: Record<string, unknown>;
  timeout_policy: Record<string, unknown>;
  row_version: number;
  attempt_no: number;
  idempotency_key: string | null;
  provider_state: string | null;
  provider_refs: Record<string, unknown>;
  provider_ref_id: string | null;
  next_observe_at: Date | null;
  last_observed_at: Date | null;
  observe_count: number;
  dispatch_after: Date | null;
  started_at: Date | null;
  error_code: string | null;
  error_detail: string | null;
  /** The executor asked for a person (migration 0120); part of the node machine's context. */
  manual_intervention_required?: boolean;
  /** When reconciliation last asked the provider about the node (migration 0120). */
  provider_checked_at?: Date | null;
  /** When reconciliation last replayed the node's movement (migration 0170). */
  reconciled_at?: Date | null;
  /** The lease token of the dispatch that claimed the node (migration 0010); null when unclaimed. */
  claim_token: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface NewTransition {
  machine_id: string;
  machine_version: string;
  entity_type: 'request' | 'node';
  entity_id: string;
  request_id: string;
  node_key: string | null;
  seq: number;
  from_state: string;
  to_state: string;
  event_type: string;
  event_payload: Record<string, unknown>;
  actor: string;
}

/** A stored transition: what was appended, with its id and time. */
export interface TransitionRow extends NewTransition {
  id: number;
  at: Date;
}

export async function lockMovement(db: Queryable, movementId: string): Promise<MovementRow | null> {
  const { rows } = await db.query<MovementRow>('SELECT * FROM movement_requests WHERE id = $1 FOR UPDATE', [movementId]);
  return rows[0] ?? null;
}

export async function getMovement(db: Queryable, movementId: string): Promise<MovementRow | null> {
  const { rows } = await db.query<MovementRow>('SELECT * FROM movement_requests WHERE id = $1', [movementId]);
  return rows[0] ?? null;
}

/** Several movements' rows, in no particular order; ids not found are absent. */
export async function getMovements(db: Queryable, movementIds: string[]): Promise<MovementRow[]> {
  const { rows } = await db.query<MovementRow>('SELECT * FROM movement_requests WHERE id = ANY($1::uuid[])', [movementIds]);
  return rows;
}

export async function getNode(db: Queryable, nodeId: string): Promise<NodeRow | null> {
  const { rows } = await db.query<NodeRow>('SELECT * FROM request_nodes WHERE id = $1', [nodeId]);
  return rows[0] ?? null;
}

export async function nodesOfMovement(db: Queryable, movementId: string): Promise<NodeRow[]> {
  const { rows } = await db.query<NodeRow>(
    'SELECT * FROM request_nodes WHERE request_id = $1 ORDER BY created_at, node_key',
    [movementId],
  );
  return rows;
}

/** The nodes of several movements, grouped by movement id (each in plan order). */
export async function nodesOfMovements(db: Queryable, movementIds: string[]): Promise<Map<string, NodeRow[]>> {
  const { rows } = await db.query<NodeRow>(
    'SELECT * FROM request_nodes WHERE request_id = ANY($1::uuid[]) ORDER BY request_id, created_at, node_key',
    [movementIds],
  );
  const out = new Map<string, NodeRow[]>(movementIds.map((id) => [id, []]));
  for (const n of rows) out.get(n.request_id)?.push(n);
  return out;
}

export async function nodeByKey(db: Queryable, movementId: string, nodeKey: string): Promise<NodeRow | null> {
  const { rows } = await db.query<NodeRow>('SELECT * FROM request_nodes WHERE request_id = $1 AND node_key = $2', [
    movementId,
    nodeKey,
  ]);
  return rows[0] ?? null;
}

export async function appendTransition(db: Queryable, t: NewTransition): Promise<TransitionRow> {
  const { rows } = await db.query<TransitionRow>(
    `INSERT INTO transitions (machine_id, machine_version, entity_type, entity_id, request_id, node_key, seq,
                              from_state, to_state, event_type, event_payload, actor)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
     RETURNING *`,
    [
      t.machine_id,
      t.machine_version,
      t.entity_type,
      t.entity_id,
      t.request_id,
      t.node_key,
      t.seq,
      t.from_state,
      t.to_state,
      t.event_type,
      JSON.stringify(t.event_payload),
      t.actor,
    ],
  );
  return rows[0];
}

export async function transitionsOfMovement(db: Queryable, movementId: string, afterId = 0, limit = 1000): Promise<TransitionRow[]> {
  const { rows } = await db.query<TransitionRow>(
    'SELECT * FROM transitions WHERE request_id = $1 AND id > $2 ORDER BY id LIMIT $3',
    [movementId, afterId, limit],
  );
  return rows;
}

/**
 * The transition logs of several movements, each in id order, grouped by movement id: read in pages
 * of `page` rows over the whole set, so a movement with a long log costs pages, not a query each.
 */
export async function transitionsOfMovements(db: Queryable, movementIds: string[], page = 5000): Promise<Map<string, TransitionRow[]>> {
  const out = new Map<string, TransitionRow[]>(movementIds.map((id) => [id, []]));
  for (let after = 0; ; ) {
    const { rows } = await db.query<TransitionRow>(
      'SELECT * FROM transitions WHERE request_id = ANY($1::uuid[]) AND id > $2 ORDER BY id LIMIT $3',
      [movementIds, after, page],
    );
    for (const t of rows) out.get(t.request_id!)?.push(t);
    if (rows.length < page) return out;
    after = rows[rows.length - 1].id;
  }
}

export async function transitionsOfEntity(db: Queryable, entityId: string): Promise<TransitionRow[]> {
  const { rows } = await db.query<TransitionRow>('SELECT * FROM transitions WHERE entity_id = $1 ORDER BY seq', [entityId]);
  return rows;
}

export interface NewMovement {
  template_version_id: string;
  template_key: string;
  template_version: number;
  intent: unknown;
  input_params: unknown;
  compiled_plan_hash: string;
  compiled_plan: unknown;
  machine_id: string;
  machine_version: string;
  request_state: string;
  approval_quorum: number;
  expires_at: string | null;
  callback_url: string | null;
  idempotency_key: string | null;
  request_fingerprint: string | null;
  created_by: string;
}

export async function insertMovement(db: Queryable, r: NewMovement): Promise<MovementRow> {
  const { rows } = await db.query<MovementRow>(
    `INSERT INTO movement_requests (template_version_id, template_key, template_version, intent, input_params,
        compiled_plan_hash, compiled_plan, machine_id, machine_version, request_state, approval_quorum, expires_at,
        callback_url, idempotency_key, request_fingerprint, created_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
     RETURNING *`,
    [
      r.template_version_id,
      r.template_key,
      r.template_version,
      JSON.stringify(r.intent),
      JSON.stringify(r.input_params),
      r.compiled_plan_hash,
      JSON.stringify(r.compiled_plan),
      r.machine_id,
      r.machine_version,
      r.request_state,
      r.approval_quorum,
      r.expires_at,
      r.callback_url,
      r.idempotency_key,
      r.request_fingerprint,
      r.created_by,
    ],
  );
  return rows[0];
}

export interface NewNode {
  plan_node_id: string;
  node_key: string;
  node_kind: string;
  action_type: string;
  executor_binding: unknown;
  signer_binding: unknown;
  config: unknown;
  timeout_policy: unknown;
  predecessor_keys: string[];
  successor_keys: string[];
  retryable: boolean;
  machine_id: string;
  machine_version: string;
  node_state: string;
  /** The expected effect pinned at creation (migration 0210): {effect} or {unavailable}; null or absent for a node without a signer binding. */
  expected_effect?: { effect: Record<string, unknown> } | { unavailable: string } | null;
}

export async function insertNodes(db: Queryable, movementId: string, nodes: NewNode[]): Promise<NodeRow[]> {
  if (nodes.length === 0) return [];
  const { rows } = await db.query<NodeRow>(
    `INSERT INTO request_nodes (request_id, plan_node_id, node_key, node_kind, action_type, executor_binding,
        signer_binding, config, timeout_policy, predecessor_keys, successor_keys, retryable, machine_id,
        machine_version, node_state, expected_effect)
     SELECT $1, n.plan_node_id, n.node_key, n.node_kind, n.action_type, n.executor_binding, n.signer_binding,
            n.config, n.timeout_policy, n.predecessor_keys, n.successor_keys, n.retryable, n.machine_id,
            n.machine_version, n.node_state, n.expected_effect
       FROM jsonb_to_recordset($2::jsonb) AS n(plan_node_id uuid, node_key text, node_kind text, action_type text,
            executor_binding jsonb, signer_binding jsonb, config jsonb, timeout_policy jsonb, predecessor_keys text[],
            successor_keys text[], retryable boolean, machine_id text, machine_version text, node_state text,
            expected_effect jsonb)
     RETURNING *`,
    [movementId, JSON.stringify(nodes)],
  );
  return rows;
}

/** The movement one of these actor ids (one principal's aliases) created with this key; the oldest. */
export async function findByIdempotencyKey(db: Queryable, createdBy: string | readonly string[], key: string): Promise<MovementRow | null> {
  const { rows } = await db.query<MovementRow>(
    'SELECT * FROM movement_requests WHERE created_by = ANY($1::text[]) AND idempotency_key = $2 ORDER BY created_at, id LIMIT 1',
    [typeof createdBy === 'string' ? [createdBy] : [...createdBy], key],
  );
  return rows[0] ?? null;
}

/** A request without its compiled plan: what list pages carry (the plan is fetched per movement). */
export type MovementSummaryRow = Omit<MovementRow, 'compiled_plan'>;

export interface ListMovementsQuery {
  state?: string;
  templateKey?: string;
  /** 1..MAX_MOVEMENT_PAGE */
  limit: number;
  /** Opaque, from a previous page's nextCursor. */
  cursor?: string | null;
}

export interface MovementPage {
  movements: MovementSummaryRow[];
  nextCursor: string | null;
}

export const MAX_MOVEMENT_PAGE = 200;

/** The columns of a MovementSummaryRow (every list of movements selects these, never the plan). */
export const MOVEMENT_SUMMARY_COLUMNS = `id, template_version_id, template_key, template_version, intent, input_params, compiled_plan_hash,
            machine_id, machine_version, request_state, row_version, approval_status, approval_quorum, approvals,
            decided_by, expires_at, current_frontier, callback_url, idempotency_key, request_fingerprint,
            created_by, created_at, updated_at, policy_rule_set_version, policy_rule_id, policy_action, policy_asset,
            policy_amount, policy_destination, policy_destination_entry, policy_approvers, policy_sources`;


/** Ids arrive from URLs; one that is not a UUID names nothing (and must never reach a uuid cast). */
export function isMovementId(id: string): boolean {
  return isUuid(id);
}

/** Newest first, paginated by (created_at, id); filters by state and template key. */
export async function listMovements(db: Queryable, q: ListMovementsQuery): Promise<MovementPage> {
  if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > MAX_MOVEMENT_PAGE) {
    throw new ValidationError(`limit must be an integer from 1 to ${MAX_MOVEMENT_PAGE}`, { limit: q.limit });
  }
  const before = q.cursor ? decodeCursor(q.cursor) : null;
  const { rows } = await db.query<MovementSummaryRow & { cursor_at: string }>(
    `SELECT ${MOVEMENT_SUMMARY_COLUMNS}, ${CURSOR_AT_SQL} AS cursor_at
       FROM movement_requests
      WHERE ($1::text IS NULL OR request_state = $1)
        AND ($2::text IS NULL OR template_key = $2)
        AND ($3::timestamptz IS NULL OR (created_at, id) < ($3::timestamptz, $4::uuid))
      ORDER BY created_at DESC, id DESC
      LIMIT $5`,
    [q.state ?? null, q.templateKey ?? null, before?.at ?? null, before?.id ?? null, q.limit + 1],
  );
  const page = pageOfRows(rows, q.limit);
  return { movements: page.rows, nextCursor: page.nextCursor };
}


/**
 * Movements to replay: never checked first, then those checked longest ago, of those changed since
 * their last check. "Changed" is the movement's row (reconciled_at < updated_at) or one of its nodes
 * (each node carries the reconciled_at of the check that last covered it, migration 0170). Both
 * sets are read from partial indexes that hold only such rows, so the cost follows the movements
 * that are due, not the history.
 *
 * The shape is chosen for the planner, which estimates a comparison of two columns at a third of
 * the table whatever the data: the movement rows are read in the index's order under a LIMIT (no
 * sort of an estimated third of the table), and the nodes' part needs no join back to the
 * movements (it orders by the nodes' own copy of reconciled_at and their updated_at), so no plan
 * can walk the movements' history and none is costly enough on paper to be JIT-compiled.
 */
export async function reconciliationCandidates(db: Queryable, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM (
       (SELECT m.id, m.reconciled_at, m.updated_at FROM movement_requests m
         WHERE m.reconciled_at IS NULL OR m.reconciled_at < m.updated_at
         ORDER BY m.reconciled_at NULLS FIRST, m.updated_at
         LIMIT $1)
       UNION ALL
       SELECT n.request_id, n.reconciled_at, n.updated_at FROM request_nodes n
        WHERE n.reconciled_at IS NULL OR n.reconciled_at < n.updated_at) due
      GROUP BY id
      ORDER BY bool_or(reconciled_at IS NULL) DESC, min(reconciled_at), min(updated_at)
      LIMIT $1`,
    [limit],
  );
  return rows.map((r) => r.id);
}

/**
 * Marks movements and their nodes as checked, with one time, and returns the ids it marked.
 *
 * Concurrency: the movement rows are locked in id order with SKIP LOCKED. A movement whose row a
 * writer holds right now is left unmarked (it stays due and the next run checks it again), so the
 * mark never waits on the hot path and cannot form a lock cycle with a group write, whose own order
 * over several movements is not sorted. Holding a movement's row keeps its nodes' writers out (every
 * writer of a node locks its movement row first, group-commit.ts), so the node update does not wait.
 *
 * checkedAt is the snapshot the check read: a change committed after it stays due (updated_at >
 * checkedAt) instead of being marked as checked. Nodes already marked since their last change are
 * left alone (no row rewritten, no lock taken on them).
 */
export async function markReconciled(db: Queryable, movementIds: string[], checkedAt: Date): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `WITH locked AS (SELECT id FROM movement_requests WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE SKIP LOCKED),
          marked AS (UPDATE movement_requests m SET reconciled_at = $2 FROM locked WHERE m.id = locked.id RETURNING m.id),
          nodes AS (UPDATE request_nodes n SET reconciled_at = $2 FROM locked
                     WHERE n.request_id = locked.id AND (n.reconciled_at IS NULL OR n.reconciled_at < n.updated_at))
     SELECT id FROM marked`,
    [movementIds, checkedAt],
  );
  return rows.map((r) => r.id);
}
