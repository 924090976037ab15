import { named, type Queryable } from './db.ts';

/**
 * The simulation lane's side-effect ledger (sim_side_effects): one row per call that reaches the
 * simulated provider (submit, observe, recover, inspect, cancel; preflight and prepare only read and
 * are not recorded), so tests and the benchmark can prove that a submit happened exactly once per
 * attempt. Every write is a
 * single autocommit statement: it is durable the moment the call returns, whatever the caller's
 * transaction does afterwards, exactly like a real provider's record of a request.
 */

export type SimCall = 'submit' | 'observe' | 'recover' | 'inspect' | 'cancel';

export interface SimCallEntry {
  request_node_id: string;
  attempt_no: number;
  idempotency_key: string;
  executor_key: string;
  call: SimCall;
}

export interface SimLedgerRow extends SimCallEntry {
  id: number;
  at: Date;
}

/**
 * Records one call. Returns how many calls of the same kind the node had made before this one
 * (0 for the first), counted in the same statement, so scripted sequences stay deterministic.
 */
export async function recordCall(db: Queryable, entry: SimCallEntry): Promise<{ priorCalls: number }> {
  // The RETURNING subquery reads the statement's snapshot, which does not include the new row.
  const { rows } = await db.query<{ prior: number }>(
    `INSERT INTO sim_side_effects (request_node_id, attempt_no, idempotency_key, executor_key, call)
     VALUES ($1, $2, $3, $4, $5)
     RETURNING (SELECT count(*) FROM sim_side_effects WHERE request_node_id = $1 AND call = $5) AS prior`,
    [entry.request_node_id, entry.attempt_no, entry.idempotency_key, entry.executor_key, entry.call],
  );
  return { priorCalls: Number(rows[0].prior) };
}

/**
 * Records several calls in one statement (one commit: the simulated provider's group commit). Each
 * entry's prior count includes the rows already stored and the entries before it in this batch
 * for the same node and call, so a batch numbers calls exactly as one-at-a-time recording would.
 */
export async function recordCalls(db: Queryable, entries: SimCallEntry[]): Promise<{ priorCalls: number }[]> {
  const { rows } = await db.query<{ ord: number; prior: number }>({
    ...named(
      db,
      'ferry_sim_record_calls',
      `WITH e AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS e(ord int, request_node_id uuid, attempt_no int,
                  idempotency_key text, executor_key text, call text)),
          numbered AS (SELECT e.*, (SELECT count(*) FROM sim_side_effects s WHERE s.request_node_id = e.request_node_id AND s.call = e.call)
                                   + row_number() OVER (PARTITION BY e.request_node_id, e.call ORDER BY e.ord) - 1 AS prior
                         FROM e),
          ins AS (INSERT INTO sim_side_effects (request_node_id, attempt_no, idempotency_key, executor_key, call)
                  SELECT request_node_id, attempt_no, idempotency_key, executor_key, call FROM numbered ORDER BY ord
                  RETURNING 1)
     SELECT ord, prior FROM numbered WHERE (SELECT count(*) FROM ins) >= 0 ORDER BY ord`,
    ),
    values: [JSON.stringify(entries.map((e, ord) => ({ ord, ...e })))],
  });
  return rows.map((r) => ({ priorCalls: Number(r.prior) }));
}

/** How many calls of this kind the node has made, over all its attempts. */
export async function countCalls(db: Queryable, requestNodeId: string, call: SimCall): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*) AS n FROM sim_side_effects WHERE request_node_id = $1 AND call = $2',
    [requestNodeId, call],
  );
  return Number(rows[0].n);
}

/** The submit calls made under one idempotency key, oldest first. More than one is a double submit. */
export async function submitsFor(db: Queryable, attemptKey: string): Promise<SimLedgerRow[]> {
  const { rows } = await db.query<SimLedgerRow>(
    `SELECT id, request_node_id, attempt_no, idempotency_key, executor_key, call, at
       FROM sim_side_effects WHERE idempotency_key = $1 AND call = 'submit' ORDER BY id`,
    [attemptKey],
  );
  return rows;
}

/** Every call a node made, oldest first. */
export async function callsFor(db: Queryable, requestNodeId: string): Promise<SimLedgerRow[]> {
  const { rows } = await db.query<SimLedgerRow>(
    `SELECT id, request_node_id, attempt_no, idempotency_key, executor_key, call, at
       FROM sim_side_effects WHERE request_node_id = $1 ORDER BY id`,
    [requestNodeId],
  );
  return rows;
}

/** Idempotency keys submitted more than once: each is a side effect that happened twice. */
export async function duplicateSubmits(db: Queryable): Promise<Array<{ idempotency_key: string; submits: number }>> {
  const { rows } = await db.query<{ idempotency_key: string; submits: number }>(
    `SELECT idempotency_key, count(*) AS submits FROM sim_side_effects
      WHERE call = 'submit' GROUP BY idempotency_key HAVING count(*) > 1 ORDER BY idempotency_key`,
  );
  return rows.map((r) => ({ idempotency_key: r.idempotency_key, submits: Number(r.submits) }));
}
