import { ValidationError } from '../errors.ts';
import { CURSOR_AT_SQL, decodeCursor, encodeCursor, isUuid } from './cursor.ts';
import type { Queryable } from './db.ts';

/**
 * SQL for movement requests and their nodes: the rows the durable transition function reads and
 * writes. State columns are written only through writeRequestTransition / writeNodeTransition,
 * which the durable transition function calls after the machine has decided.
 */

export interface RequestRow {
  id: string;
  template_version_id: string;
  template_key: string;
  template_version: number;
  intent: Record<string, unknown>;
  input_params: Record<string, unknown>;
  compiled_plan_hash: string;
  compiled_plan: Record<string, unknown>;
  machine_id: string;
  machine_version: string;
  request_state: string;
  row_version: number;
  approval_status: 'pending' | 'approved' | 'rejected';
  approval_quorum: number;
  approvals: { by: string; at: string }[];
  decided_by: string | null;
  expires_at: Date | null;
  current_frontier: string[];
  callback_url: string | null;
  idempotency_key: string | null;
  request_fingerprint: string | null;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

export interface NodeRow {
  id: string;
  request_id: string;
  plan_node_id: string;
  node_key: string;
  node_kind: string;
  action_type: string;
  executor_binding: unknown;
  signer_binding: unknown;
  config: Record<string, unknown>;
  timeout_policy: Record<string, unknown>;
  predecessor_keys: string[];
  successor_keys: string[];
  retryable: boolean;
  machine_id: string;
  machine_version: string;
  node_state: string;
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
  /** The lease token of the dispatch that claimed the node (migration 0010); null when unclaimed. */
  claim_token: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface TransitionRow {
  id: number;
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
  at: Date;
}

export async function lockRequest(db: Queryable, requestId: string): Promise<RequestRow | null> {
  const { rows } = await db.query<RequestRow>('SELECT * FROM movement_requests WHERE id = $1 FOR UPDATE', [requestId]);
  return rows[0] ?? null;
}

export async function getRequest(db: Queryable, requestId: string): Promise<RequestRow | null> {
  const { rows } = await db.query<RequestRow>('SELECT * FROM movement_requests WHERE id = $1', [requestId]);
  return rows[0] ?? null;
}

/** Locks the request a node belongs to (the node itself is locked after, keeping the lock order). */
export async function lockRequestOfNode(db: Queryable, nodeId: string): Promise<RequestRow | null> {
  const { rows } = await db.query<RequestRow>(
    'SELECT * FROM movement_requests WHERE id = (SELECT request_id FROM request_nodes WHERE id = $1) FOR UPDATE',
    [nodeId],
  );
  return rows[0] ?? null;
}

export async function lockNode(db: Queryable, nodeId: string): Promise<NodeRow | null> {
  const { rows } = await db.query<NodeRow>('SELECT * FROM request_nodes WHERE id = $1 FOR UPDATE', [nodeId]);
  return rows[0] ?? null;
}

export async function getNode(db: Queryable, nodeId: string): Promise<NodeRow | null> {
  const { rows } = await db.query<NodeRow>('SELECT * FROM request_nodes WHERE id = $1', [nodeId]);
  return rows[0] ?? null;
}

export async function nodesOfRequest(db: Queryable, requestId: string): Promise<NodeRow[]> {
  const { rows } = await db.query<NodeRow>(
    'SELECT * FROM request_nodes WHERE request_id = $1 ORDER BY created_at, node_key',
    [requestId],
  );
  return rows;
}

/** The nodes of several requests, grouped by request id (each in plan order). */
export async function nodesOfRequests(db: Queryable, requestIds: string[]): Promise<Map<string, NodeRow[]>> {
  const { rows } = await db.query<NodeRow>(
    'SELECT * FROM request_nodes WHERE request_id = ANY($1::uuid[]) ORDER BY request_id, created_at, node_key',
    [requestIds],
  );
  const out = new Map<string, NodeRow[]>(requestIds.map((id) => [id, []]));
  for (const n of rows) out.get(n.request_id)?.push(n);
  return out;
}

export async function nodeByKey(db: Queryable, requestId: string, nodeKey: string): Promise<NodeRow | null> {
  const { rows } = await db.query<NodeRow>('SELECT * FROM request_nodes WHERE request_id = $1 AND node_key = $2', [
    requestId,
    nodeKey,
  ]);
  return rows[0] ?? null;
}

export interface RequestWrite {
  request_state: string;
  approval_status: string;
  approvals: unknown[];
  decided_by: string | null;
}

/** The log entry written with a state change: what happened, and who did it. */
export interface TransitionCause {
  machine_id: string;
  machine_version: string;
  event_type: string;
  event_payload: Record<string, unknown>;
  actor: string;
}

/** A state change and its log row, as written together. */
export interface Logged<Row> {
  row: Row;
  transition: TransitionRow;
}

function loggedFrom<Row extends { row_version: number }>(
  r: Row & { t_id: number; t_at: Date },
  entity: { type: 'request' | 'node'; id: string; requestId: string; nodeKey: string | null; from: string; to: string },
  cause: TransitionCause,
): Logged<Row> {
  const { t_id, t_at, ...row } = r;
  return {
    row: row as unknown as Row,
    transition: {
      id: t_id,
      machine_id: cause.machine_id,
      machine_version: cause.machine_version,
      entity_type: entity.type,
      entity_id: entity.id,
      request_id: entity.requestId,
      node_key: entity.nodeKey,
      seq: r.row_version,
      from_state: entity.from,
      to_state: entity.to,
      event_type: cause.event_type,
      event_payload: cause.event_payload,
      actor: cause.actor,
      at: t_at,
    },
  };
}

/**
 * Writes a request's new state and appends its transition row in one statement. The machine's
 * precondition is repeated in SQL: the row must still be in `fromState` at `rowVersion`; null when
 * it is not (a concurrent writer won). The log row's seq is the new row version: gap-free per entity.
 */
export async function writeRequestTransition(
  db: Queryable,
  id: string,
  fromState: string,
  rowVersion: number,
  next: RequestWrite,
  cause: TransitionCause,
): Promise<Logged<RequestRow> | null> {
  const { rows } = await db.query<RequestRow & { t_id: number; t_at: Date }>(
    `WITH u AS (
       UPDATE movement_requests
          SET request_state = $4, approval_status = $5, approvals = $6, decided_by = $7,
              row_version = row_version + 1, updated_at = now()
        WHERE id = $1 AND request_state = $2 AND row_version = $3
        RETURNING *),
     t AS (
       INSERT INTO transitions (machine_id, machine_version, entity_type, entity_id, request_id, node_key, seq,
                                from_state, to_state, event_type, event_payload, actor)
       SELECT $8, $9, 'request', u.id, u.id, NULL, u.row_version, $2, u.request_state, $10, $11, $12 FROM u
       RETURNING id, at)
     SELECT u.*, t.id AS t_id, t.at AS t_at FROM u, t`,
    [
      id,
      fromState,
      rowVersion,
      next.request_state,
      next.approval_status,
      JSON.stringify(next.approvals),
      next.decided_by,
      cause.machine_id,
      cause.machine_version,
      cause.event_type,
      JSON.stringify(cause.event_payload),
      cause.actor,
    ],
  );
  if (!rows[0]) return null;
  return loggedFrom(rows[0], { type: 'request', id, requestId: id, nodeKey: null, from: fromState, to: next.request_state }, cause);
}

export interface NodeWrite {
  node_state: string;
  attempt_no: number;
  started_at: string | null;
  provider_state: string | null;
  provider_refs: Record<string, unknown>;
  provider_ref_id: string | null;
  next_observe_at: string | null;
  last_observed_at: string | null;
  observe_count: number;
  dispatch_after: string | null;
  error_code: string | null;
  error_detail: string | null;
}

/** Writes a node's new state and appends its transition row in one statement (see writeRequestTransition). */
export async function writeNodeTransition(
  db: Queryable,
  node: Pick<NodeRow, 'id' | 'request_id' | 'node_key'>,
  fromState: string,
  rowVersion: number,
  next: NodeWrite,
  cause: TransitionCause,
): Promise<Logged<NodeRow> | null> {
  const { rows } = await db.query<NodeRow & { t_id: number; t_at: Date }>(
    `WITH u AS (
       UPDATE request_nodes
          SET node_state = $4, attempt_no = $5,
              idempotency_key = CASE WHEN $5::int > 0 THEN id::text || ':' || $5::int ELSE NULL END,
              started_at = $6, provider_state = $7, provider_refs = $8, provider_ref_id = $9,
              next_observe_at = $10, last_observed_at = $11, observe_count = $12, dispatch_after = $13,
              error_code = $14, error_detail = $15, row_version = row_version + 1, updated_at = now()
        WHERE id = $1 AND node_state = $2 AND row_version = $3
        RETURNING *),
     t AS (
       INSERT INTO transitions (machine_id, machine_version, entity_type, entity_id, request_id, node_key, seq,
                                from_state, to_state, event_type, event_payload, actor)
       SELECT $16, $17, 'node', u.id, u.request_id, u.node_key, u.row_version, $2, u.node_state, $18, $19, $20 FROM u
       RETURNING id, at)
     SELECT u.*, t.id AS t_id, t.at AS t_at FROM u, t`,
    [
      node.id,
      fromState,
      rowVersion,
      next.node_state,
      next.attempt_no,
      next.started_at,
      next.provider_state,
      JSON.stringify(next.provider_refs),
      next.provider_ref_id,
      next.next_observe_at,
      next.last_observed_at,
      next.observe_count,
      next.dispatch_after,
      next.error_code,
      next.error_detail,
      cause.machine_id,
      cause.machine_version,
      cause.event_type,
      JSON.stringify(cause.event_payload),
      cause.actor,
    ],
  );
  if (!rows[0]) return null;
  return loggedFrom(
    rows[0],
    { type: 'node', id: node.id, requestId: node.request_id, nodeKey: node.node_key, from: fromState, to: next.node_state },
    cause,
  );
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

export async function setFrontier(db: Queryable, requestId: string, frontier: string[]): Promise<void> {
  await db.query('UPDATE movement_requests SET current_frontier = $2 WHERE id = $1', [requestId, JSON.stringify(frontier)]);
}

export async function transitionsOfRequest(db: Queryable, requestId: string, afterId = 0, limit = 1000): Promise<TransitionRow[]> {
  const { rows } = await db.query<TransitionRow>(
    'SELECT * FROM transitions WHERE request_id = $1 AND id > $2 ORDER BY id LIMIT $3',
    [requestId, afterId, limit],
  );
  return rows;
}

export async function transitionsOfEntity(db: Queryable, entityId: string): Promise<TransitionRow[]> {
  const { rows } = await db.query<TransitionRow>('SELECT * FROM transitions WHERE entity_id = $1 ORDER BY seq', [entityId]);
  return rows;
}

/** Wakes listeners when the surrounding transaction commits (Postgres delivers NOTIFY on commit). */
export async function notifyOnCommit(db: Queryable, channel: string, payload: string): Promise<void> {
  await db.query('SELECT pg_notify($1, $2)', [channel, payload]);
}

export interface NewRequest {
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

export async function insertRequest(db: Queryable, r: NewRequest): Promise<RequestRow> {
  const { rows } = await db.query<RequestRow>(
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
}

export async function insertNodes(db: Queryable, requestId: string, nodes: NewNode[]): Promise<NodeRow[]> {
  if (nodes.length === 0) return [];
  const { rows } = await db.query<NodeRow>(
    `INSERT INTO request_nodes (request_id, plan_node_id, node_key, node_kind, action_type, executor_binding,
        signer_binding, config, timeout_policy, predecessor_keys, successor_keys, retryable, machine_id,
        machine_version, node_state)
     SELECT $1, n.plan_node_id, n.node_key, n.node_kind, n.action_type, n.executor_binding, n.signer_binding,
            n.config, n.timeout_policy, n.predecessor_keys, n.successor_keys, n.retryable, n.machine_id,
            n.machine_version, n.node_state
       FROM jsonb_to_recordset($2::jsonb) AS n(plan_node_id uuid, node_key text, node_kind text, action_type text,
            executor_binding jsonb, signer_binding jsonb, config jsonb, timeout_policy jsonb, predecessor_keys text[],
            successor_keys text[], retryable boolean, machine_id text, machine_version text, node_state text)
     RETURNING *`,
    [requestId, JSON.stringify(nodes)],
  );
  return rows;
}

export async function findByIdempotencyKey(db: Queryable, createdBy: string, key: string): Promise<RequestRow | null> {
  const { rows } = await db.query<RequestRow>(
    'SELECT * FROM movement_requests WHERE created_by = $1 AND idempotency_key = $2',
    [createdBy, key],
  );
  return rows[0] ?? null;
}

/** A request without its compiled plan: what list pages carry (the plan is fetched per movement). */
export type RequestSummaryRow = Omit<RequestRow, 'compiled_plan'>;

export interface ListMovementsQuery {
  state?: string;
  templateKey?: string;
  /** 1..MAX_MOVEMENT_PAGE */
  limit: number;
  /** Opaque, from a previous page's nextCursor. */
  cursor?: string | null;
}

export interface MovementPage {
  movements: RequestSummaryRow[];
  nextCursor: string | null;
}

export const MAX_MOVEMENT_PAGE = 200;


/** Ids arrive from URLs; one that is not a UUID names nothing (and must never reach a uuid cast). */
export function isRequestId(id: string): boolean {
  return isUuid(id);
}

/** Newest first, paginated by (created_at, id); filters by state and template key. */
export async function listMovements(db: Queryable, q: ListMovementsQuery): Promise<MovementPage> {
  if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > MAX_MOVEMENT_PAGE) {
    throw new ValidationError(`limit must be an integer from 1 to ${MAX_MOVEMENT_PAGE}`, { limit: q.limit });
  }
  const before = q.cursor ? decodeCursor(q.cursor) : null;
  const { rows } = await db.query<RequestSummaryRow & { cursor_at: string }>(
    `SELECT id, template_version_id, template_key, template_version, intent, input_params, compiled_plan_hash,
            machine_id, machine_version, request_state, row_version, approval_status, approval_quorum, approvals,
            decided_by, expires_at, current_frontier, callback_url, idempotency_key, request_fingerprint,
            created_by, created_at, updated_at,
            ${CURSOR_AT_SQL} AS cursor_at
       FROM movement_requests
      WHERE ($1::text IS NULL OR request_state = $1)
        AND ($2::text IS NULL OR template_key = $2)
        AND ($3::timestamptz IS NULL OR (created_at, id) < ($3::timestamptz, $4::uuid))
      ORDER BY created_at DESC, id DESC
      LIMIT $5`,
    [q.state ?? null, q.templateKey ?? null, before?.at ?? null, before?.id ?? null, q.limit + 1],
  );
  const page = rows.slice(0, q.limit);
  const last = page[page.length - 1];
  const nextCursor = rows.length > q.limit && last ? encodeCursor(last.cursor_at, last.id) : null;
  return { movements: page.map(({ cursor_at: _c, ...row }) => row), nextCursor };
}


/** Movements to replay: never checked first, then those changed since their last check, oldest first. */
export async function reconciliationCandidates(db: Queryable, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT r.id FROM movement_requests r
      WHERE r.reconciled_at IS NULL OR r.reconciled_at < r.updated_at
         OR EXISTS (SELECT 1 FROM request_nodes n WHERE n.request_id = r.id AND n.updated_at > r.reconciled_at)
      ORDER BY r.reconciled_at NULLS FIRST, r.updated_at
      LIMIT $1`,
    [limit],
  );
  return rows.map((r) => r.id);
}

export async function markReconciled(db: Queryable, requestId: string): Promise<void> {
  await db.query('UPDATE movement_requests SET reconciled_at = now() WHERE id = $1', [requestId]);
}
