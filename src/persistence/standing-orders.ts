import type { StandingOrderTrigger } from '../policy/standing-orders.ts';
import type { Client, Queryable } from './db.ts';

/**
 * The standing orders' tables (migration 0371): the orders (the standing order machine's snapshot),
 * their runs (one per slot or crossing, by a unique key), and the balance facts a run reads. The
 * standing order service (src/services/standing-orders.ts) owns the transactions and audit.
 */

export interface StandingOrderRow {
  id: string;
  name: string;
  template_key: string;
  intent: Record<string, unknown>;
  asset: string;
  destinations: string[];
  max_per_run: string;
  max_per_window: string;
  window_seconds: number;
  trigger: StandingOrderTrigger;
  expires_at: Date;
  machine_id: string;
  machine_version: string;
  /** order_state, under the name the row machine helper reads (durable/row-machine.ts). */
  proposal_state: string;
  row_version: number;
  proposed_by: string;
  required_approvals: number;
  approvals: { by: string; at: string }[];
  decided_by: string | null;
  reason: string | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `id, name, template_key, intent, asset, destinations, max_per_run::text AS max_per_run, max_per_window::text AS max_per_window,
  window_seconds, trigger, expires_at, machine_id, machine_version, order_state AS proposal_state, row_version, proposed_by,
  required_approvals, approvals, decided_by, reason, created_at, updated_at`;

export type NewStandingOrder = Pick<
  StandingOrderRow,
  'name' | 'template_key' | 'intent' | 'asset' | 'destinations' | 'max_per_run' | 'max_per_window' | 'window_seconds' | 'trigger' | 'machine_id' | 'machine_version' | 'proposed_by' | 'required_approvals'
> & { expires_at: string; order_state: string };

/** Null when the name is taken. */
export async function insertStandingOrder(client: Client, o: NewStandingOrder): Promise<StandingOrderRow | null> {
  const { rows } = await client.query<StandingOrderRow>(
    `INSERT INTO standing_orders (name, template_key, intent, asset, destinations, max_per_run, max_per_window, window_seconds, trigger,
                                  expires_at, machine_id, machine_version, order_state, proposed_by, required_approvals)
     VALUES ($1, $2, $3::jsonb, $4, $5::text[], $6::numeric, $7::numeric, $8, $9::jsonb, $10, $11, $12, $13, $14, $15)
     ON CONFLICT (name) DO NOTHING RETURNING ${COLUMNS}`,
    [o.name, o.template_key, JSON.stringify(o.intent), o.asset, o.destinations, o.max_per_run, o.max_per_window, o.window_seconds,
      JSON.stringify(o.trigger), o.expires_at, o.machine_id, o.machine_version, o.order_state, o.proposed_by, o.required_approvals],
  );
  return rows[0] ?? null;
}

export async function getStandingOrder(db: Queryable, id: string): Promise<StandingOrderRow | null> {
  const { rows } = await db.query<StandingOrderRow>(`SELECT ${COLUMNS} FROM standing_orders WHERE id::text = $1 OR name = $1`, [id]);
  return rows[0] ?? null;
}

export async function lockStandingOrder(client: Client, id: string): Promise<StandingOrderRow | null> {
  const { rows } = await client.query<StandingOrderRow>(`SELECT ${COLUMNS} FROM standing_orders WHERE id::text = $1 OR name = $1 FOR UPDATE`, [id]);
  return rows[0] ?? null;
}

export async function listStandingOrders(db: Queryable, filter: { state?: string; limit: number }): Promise<StandingOrderRow[]> {
  const { rows } = await db.query<StandingOrderRow>(
    `SELECT ${COLUMNS} FROM standing_orders WHERE ($1::text IS NULL OR order_state = $1) ORDER BY created_at DESC LIMIT $2`,
    [filter.state ?? null, filter.limit],
  );
  return rows;
}

/** The orders that may run (ACTIVE), and those past their expiry that have not expired yet: one index read when there are none. */
/** How many standing orders are in each state (states without one are absent). */
export async function standingOrderCountsByState(db: Queryable): Promise<{ state: string; count: number }[]> {
  const { rows } = await db.query<{ state: string; count: number }>('SELECT order_state AS state, count(*)::int AS count FROM standing_orders GROUP BY order_state');
  return rows;
}

export async function dueStandingOrders(db: Queryable, now: Date, limit: number): Promise<{ active: StandingOrderRow[]; expired: string[] }> {
  const { rows } = await db.query<StandingOrderRow>(
    `SELECT ${COLUMNS} FROM standing_orders WHERE order_state = 'ACTIVE' ORDER BY created_at LIMIT $1`,
    [limit],
  );
  const { rows: stale } = await db.query<{ id: string }>(
    `SELECT id FROM standing_orders WHERE order_state IN ('PROPOSED', 'PAUSED') AND expires_at <= $1 LIMIT $2`,
    [now, limit],
  );
  return { active: rows.filter((r) => r.expires_at.getTime() > now.getTime()), expired: [...rows.filter((r) => r.expires_at.getTime() <= now.getTime()).map((r) => r.id), ...stale.map((r) => r.id)] };
}

export async function updateStandingOrder(
  client: Client,
  id: string,
  fromVersion: number,
  set: { order_state: string; approvals: { by: string; at: string }[]; decided_by: string | null; reason: string | null },
): Promise<StandingOrderRow | null> {
  const { rows } = await client.query<StandingOrderRow>(
    `UPDATE standing_orders SET order_state = $3, approvals = $4::jsonb, decided_by = $5, reason = $6, row_version = row_version + 1, updated_at = now()
      WHERE id = $1 AND row_version = $2 RETURNING ${COLUMNS}`,
    [id, fromVersion, set.order_state, JSON.stringify(set.approvals), set.decided_by, set.reason],
  );
  return rows[0] ?? null;
}

export async function standingOrderTransitions(db: Queryable, id: string) {
  const { rows } = await db.query(
    `SELECT seq, from_state, to_state, event_type, event_payload, actor, at FROM transitions
      WHERE entity_type = 'standing_order' AND entity_id = $1 ORDER BY seq`,
    [id],
  );
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Runs

export interface StandingOrderRunRow {
  id: string;
  standing_order_id: string;
  slot_key: string;
  amount: string | null;
  destination_entry: string | null;
  movement_id: string | null;
  outcome: 'pending' | 'approved' | 'waiting' | 'refused' | 'skipped';
  error_code: string | null;
  error_detail: string | null;
  created_at: Date;
}

const RUN_COLUMNS = `id, standing_order_id, slot_key, amount::text AS amount, destination_entry, movement_id, outcome, error_code, error_detail, created_at`;

/** The run of one slot or crossing; null when a run of it exists already (another process, or before a restart). */
export async function insertRun(
  db: Queryable,
  r: { standing_order_id: string; slot_key: string; amount: string | null; destination_entry: string | null; outcome: StandingOrderRunRow['outcome'] },
): Promise<StandingOrderRunRow | null> {
  const { rows } = await db.query<StandingOrderRunRow>(
    `INSERT INTO standing_order_runs (standing_order_id, slot_key, amount, destination_entry, outcome)
     VALUES ($1, $2, $3::numeric, $4, $5) ON CONFLICT (standing_order_id, slot_key) DO NOTHING RETURNING ${RUN_COLUMNS}`,
    [r.standing_order_id, r.slot_key, r.amount, r.destination_entry, r.outcome],
  );
  return rows[0] ?? null;
}

/** Runs whose movement was not created yet (a process stopped between the two steps). */
export async function pendingRuns(db: Queryable, orderId: string): Promise<StandingOrderRunRow[]> {
  const { rows } = await db.query<StandingOrderRunRow>(`SELECT ${RUN_COLUMNS} FROM standing_order_runs WHERE standing_order_id = $1 AND outcome = 'pending' ORDER BY created_at`, [orderId]);
  return rows;
}

/** Takes a pending run for one runner for `seconds`; false when another runner holds it (or it is done). */
export async function leaseRun(db: Queryable, id: string, seconds: number): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE standing_order_runs SET leased_until = now() + make_interval(secs => $2)
      WHERE id = $1 AND outcome = 'pending' AND (leased_until IS NULL OR leased_until < now())`,
    [id, seconds],
  );
  return (rowCount ?? 0) > 0;
}

/** Records a run's outcome; only a pending run changes (whoever carries it on first). */
export async function finishRun(
  db: Queryable,
  id: string,
  set: { movement_id: string | null; outcome: StandingOrderRunRow['outcome']; error_code?: string | null; error_detail?: string | null },
): Promise<StandingOrderRunRow | null> {
  const { rows } = await db.query<StandingOrderRunRow>(
    `UPDATE standing_order_runs SET movement_id = $2, outcome = $3, error_code = $4, error_detail = $5
      WHERE id = $1 AND outcome = 'pending' RETURNING ${RUN_COLUMNS}`,
    [id, set.movement_id, set.outcome, set.error_code ?? null, set.error_detail ?? null],
  );
  return rows[0] ?? null;
}

export async function runsOf(db: Queryable, orderId: string, limit: number): Promise<StandingOrderRunRow[]> {
  const { rows } = await db.query<StandingOrderRunRow>(
    `SELECT ${RUN_COLUMNS} FROM standing_order_runs WHERE standing_order_id = $1 ORDER BY created_at DESC, id LIMIT $2`,
    [orderId, limit],
  );
  return rows;
}

/** What the order's runs approved by the order itself moved since `since` (other than `except`). */
export async function windowUsed(db: Queryable, orderId: string, since: Date, except: string): Promise<string> {
  const { rows } = await db.query<{ total: string }>(
    `SELECT coalesce(sum(amount), 0)::text AS total FROM standing_order_runs
      WHERE standing_order_id = $1 AND outcome = 'approved' AND created_at >= $2 AND id <> $3`,
    [orderId, since, except],
  );
  const t = rows[0].total;
  return t.includes('.') ? t.replace(/0+$/, '').replace(/\.$/, '') || '0' : t;
}

// ---------------------------------------------------------------------------------------------
// Balance facts

/**
 * The latest snapshot of a watched balance and the first snapshot of its current excursion past
 * `threshold` (base units): above it ('above') or below it ('below'). The crossing's id names the
 * excursion: it stays the same until the balance comes back within the threshold.
 */
export async function balanceFacts(
  db: Queryable,
  b: { chain: string; wallet: string; asset: string },
  threshold: (decimals: number) => string,
  side: 'above' | 'below',
): Promise<{ amount: string; decimals: number; crossingId: string | null } | null> {
  const { rows } = await db.query<{ id: string; amount: string; decimals: number }>(
    `SELECT id::text, amount::text, decimals FROM balance_snapshots WHERE chain = $1 AND wallet = $2 AND asset = $3 ORDER BY id DESC LIMIT 1`,
    [b.chain, b.wallet, b.asset],
  );
  const latest = rows[0];
  if (!latest) return null;
  const t = threshold(latest.decimals);
  const past = side === 'above' ? 'amount > $4::numeric' : 'amount < $4::numeric';
  const within = side === 'above' ? 'amount <= $4::numeric' : 'amount >= $4::numeric';
  const { rows: crossing } = await db.query<{ id: string }>(
    `SELECT id::text FROM balance_snapshots
      WHERE chain = $1 AND wallet = $2 AND asset = $3 AND ${past}
        AND id > coalesce((SELECT max(id) FROM balance_snapshots WHERE chain = $1 AND wallet = $2 AND asset = $3 AND ${within}), 0)
      ORDER BY id LIMIT 1`,
    [b.chain, b.wallet, b.asset, t],
  );
  return { amount: latest.amount, decimals: latest.decimals, crossingId: crossing[0]?.id ?? null };
}
