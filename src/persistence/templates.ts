import { canonicalJson, compareCodeUnits } from '../plan/canonical-json.ts';
import { graphHash, planNodeFields, sortEdges } from '../plan/compile.ts';
import type { ExecutorBinding, NodeKind, SignerBinding, TemplateDefinition } from '../plan/template-schema.ts';
import type { TemplateVersionNode, TemplateVersionRecord } from '../plan/types.ts';
import { validateTemplate, validateTemplateStructure, type BindingCatalog } from '../plan/validate.ts';
import type { Client, Queryable } from './db.ts';

/**
 * Plan templates and their versions: the only module with SQL for plan_templates, template_versions,
 * plan_nodes and plan_edges. A version is immutable once written; a template's behaviour changes only
 * by adding a version.
 *
 * Each node's retryable flag lives in the version's stored definition (plan_nodes has no column for
 * it) and is read back from there.
 */

export type { TemplateVersionNode, TemplateVersionRecord } from '../plan/types.ts';

export interface TemplateRow {
  id: string;
  template_key: string;
  description: string;
  latest_version: number;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

export interface TemplateSummary {
  template_key: string;
  description: string;
  latest_version: number;
  created_at: Date;
  updated_at: Date;
}

export interface TemplateVersionSummary {
  version: number;
  graph_hash: string;
  created_by: string;
  created_at: Date;
}

export interface SaveTemplateResult {
  template: TemplateRow;
  version: TemplateVersionRecord;
  /** False when a version with the same graph hash already existed and was returned instead. */
  created: boolean;
  /**
   * Nodes whose submitted timeout_policy differs from the existing version's. Timeout policies are
   * outside the graph hash, so such a save returns the existing version unchanged; callers should tell
   * the operator instead of letting the change vanish silently.
   */
  timeout_policy_not_applied: string[];
}

const TEMPLATE_COLUMNS = 'id, template_key, description, latest_version, created_by, created_at, updated_at';

/**
 * Saves a definition as the template's next version, inside the caller's transaction (READ COMMITTED,
 * Postgres's default). The template row is created if needed and locked, so concurrent saves of one
 * key queue up: the first writes version N, the others then see it.
 *
 * A definition whose graph hash equals an existing version's returns that version (created=false):
 * resubmitting a template, or changing only its description or timeout policies, is not a new plan.
 * The description is updated either way when given; changed timeout policies are not applied to the
 * existing version but reported in timeout_policy_not_applied.
 *
 * The definition is validated first (structure always; bindings too when a catalog is given), so an
 * invalid template never reaches the tables.
 */
export async function saveTemplate(
  client: Client,
  def: TemplateDefinition,
  createdBy: string,
  known?: BindingCatalog,
): Promise<SaveTemplateResult> {
  const { order } = known ? validateTemplate(def, known) : validateTemplateStructure(def);
  const hash = graphHash(def);

  await client.query(
    `INSERT INTO plan_templates (template_key, description, created_by) VALUES ($1, $2, $3)
     ON CONFLICT (template_key) DO NOTHING`,
    [def.template_key, def.description ?? '', createdBy],
  );
  const locked = await client.query<TemplateRow>(
    `SELECT ${TEMPLATE_COLUMNS} FROM plan_templates WHERE template_key = $1 FOR UPDATE`,
    [def.template_key],
  );
  let template = locked.rows[0];

  const existing = await client.query<{ version: number }>(
    'SELECT version FROM template_versions WHERE template_id = $1 AND graph_hash = $2',
    [template.id, hash],
  );
  let versionNumber: number;
  let created: boolean;
  if (existing.rows.length > 0) {
    versionNumber = existing.rows[0].version;
    created = false;
    if (def.description !== undefined && def.description !== template.description) {
      template = await updateTemplateRow(client, template.id, def.description, template.latest_version);
    }
  } else {
    versionNumber = template.latest_version + 1;
    created = true;
    const inserted = await client.query<{ id: string }>(
      `INSERT INTO template_versions (template_id, version, graph_hash, risk_controls, definition, created_by)
       VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6) RETURNING id`,
      [template.id, versionNumber, hash, JSON.stringify(def.risk_controls ?? {}), JSON.stringify(def), createdBy],
    );
    const versionId = inserted.rows[0].id;
    const position = new Map(order.map((key, i) => [key, i]));
    // retryable stays in the definition: plan_nodes has no column for it (the recordset ignores it).
    const nodes = def.nodes.map((n) => ({ ...planNodeFields(n), position: position.get(n.node_key)! }));
    await client.query(
      `INSERT INTO plan_nodes (template_version_id, node_key, node_kind, action_type, executor_binding, signer_binding,
                               config, timeout_policy, position)
       SELECT $1, n.node_key, n.node_kind, n.action_type, n.executor_binding, NULLIF(n.signer_binding, 'null'::jsonb),
              n.config, n.timeout_policy, n.position
         FROM jsonb_to_recordset($2::jsonb) AS n(node_key text, node_kind text, action_type text, executor_binding jsonb,
                                                 signer_binding jsonb, config jsonb, timeout_policy jsonb, position integer)`,
      [versionId, JSON.stringify(nodes)],
    );
    if (def.edges.length > 0) {
      await client.query(
        `INSERT INTO plan_edges (template_version_id, from_node_key, to_node_key)
         SELECT $1, e.from_key, e.to_key FROM unnest($2::text[], $3::text[]) AS e(from_key, to_key)`,
        [versionId, def.edges.map((e) => e.from), def.edges.map((e) => e.to)],
      );
    }
    template = await updateTemplateRow(client, template.id, def.description ?? template.description, versionNumber);
  }

  const version = (await getTemplateVersion(client, def.template_key, versionNumber))!;
  const stored = new Map(version.nodes.map((n) => [n.node_key, canonicalJson(n.timeout_policy)]));
  const timeoutPolicyNotApplied = def.nodes
    .filter((n) => stored.get(n.node_key) !== canonicalJson(n.timeout_policy ?? {}))
    .map((n) => n.node_key)
    .sort(compareCodeUnits);
  return { template, version, created, timeout_policy_not_applied: timeoutPolicyNotApplied };
}

async function updateTemplateRow(client: Client, id: string, description: string, latestVersion: number): Promise<TemplateRow> {
  const { rows } = await client.query<TemplateRow>(
    `UPDATE plan_templates SET description = $2, latest_version = $3, updated_at = now() WHERE id = $1
     RETURNING ${TEMPLATE_COLUMNS}`,
    [id, description, latestVersion],
  );
  return rows[0];
}

export async function getTemplate(db: Queryable, templateKey: string): Promise<TemplateRow | null> {
  const { rows } = await db.query<TemplateRow>(`SELECT ${TEMPLATE_COLUMNS} FROM plan_templates WHERE template_key = $1`, [
    templateKey,
  ]);
  return rows[0] ?? null;
}

/** Every template that has at least one version, by key. */
export async function listTemplates(db: Queryable): Promise<TemplateSummary[]> {
  const { rows } = await db.query<TemplateSummary>(
    `SELECT template_key, description, latest_version, created_at, updated_at FROM plan_templates
      WHERE latest_version > 0 ORDER BY template_key COLLATE "C"`,
  );
  return rows;
}

/** A template's versions, newest first; empty when the key is unknown. */
export async function listTemplateVersions(db: Queryable, templateKey: string): Promise<TemplateVersionSummary[]> {
  const { rows } = await db.query<TemplateVersionSummary>(
    `SELECT tv.version, tv.graph_hash, tv.created_by, tv.created_at
       FROM template_versions tv JOIN plan_templates pt ON pt.id = tv.template_id
      WHERE pt.template_key = $1 ORDER BY tv.version DESC`,
    [templateKey],
  );
  return rows;
}

/** One version of a template (the latest when version is omitted), with its nodes and edges; null if absent. */
export async function getTemplateVersion(
  db: Queryable,
  templateKey: string,
  version?: number,
): Promise<TemplateVersionRecord | null> {
  const { rows } = await db.query<VersionRow>(
    `${VERSION_SELECT} WHERE pt.template_key = $1 AND tv.version = COALESCE($2::integer, pt.latest_version)`,
    [templateKey, version ?? null],
  );
  return rows.length > 0 ? toRecord(rows[0]) : null;
}

/** A version by its id, as referenced by movement_requests.template_version_id; null if absent. */
export async function getTemplateVersionById(db: Queryable, id: string): Promise<TemplateVersionRecord | null> {
  const { rows } = await db.query<VersionRow>(`${VERSION_SELECT} WHERE tv.id = $1`, [id]);
  return rows.length > 0 ? toRecord(rows[0]) : null;
}

/** A version as VERSION_SELECT reads it: its nodes without retryable, which only its definition holds. */
interface VersionRow extends Omit<TemplateVersionRecord, 'nodes'> {
  definition: TemplateDefinition;
  nodes: Array<Omit<TemplateVersionNode, 'retryable'>>;
}

// One round trip: nodes and edges come back as JSON arrays next to the version row.
const VERSION_SELECT = `
  SELECT tv.id, tv.template_id, pt.template_key, tv.version, tv.graph_hash, tv.risk_controls, tv.definition,
         tv.created_by, tv.created_at,
         (SELECT COALESCE(jsonb_agg(jsonb_build_object(
                   'plan_node_id', pn.id, 'node_key', pn.node_key, 'node_kind', pn.node_kind,
                   'action_type', pn.action_type, 'executor_binding', pn.executor_binding,
                   'signer_binding', pn.signer_binding, 'config', pn.config,
                   'timeout_policy', pn.timeout_policy, 'position', pn.position) ORDER BY pn.position), '[]'::jsonb)
            FROM plan_nodes pn WHERE pn.template_version_id = tv.id) AS nodes,
         (SELECT COALESCE(jsonb_agg(jsonb_build_object('from', pe.from_node_key, 'to', pe.to_node_key)), '[]'::jsonb)
            FROM plan_edges pe WHERE pe.template_version_id = tv.id) AS edges
    FROM template_versions tv JOIN plan_templates pt ON pt.id = tv.template_id`;

function toRecord(row: VersionRow): TemplateVersionRecord {
  const retryable = new Map(row.definition.nodes.map((n) => [n.node_key, n.retryable ?? false]));
  return {
    id: row.id,
    template_id: row.template_id,
    template_key: row.template_key,
    version: row.version,
    graph_hash: row.graph_hash,
    risk_controls: row.risk_controls,
    intent_schema: row.definition.intent_schema ?? null,
    created_by: row.created_by,
    created_at: row.created_at,
    nodes: row.nodes.map((n) => ({
      plan_node_id: n.plan_node_id,
      node_key: n.node_key,
      node_kind: n.node_kind as NodeKind,
      action_type: n.action_type,
      executor_binding: n.executor_binding as ExecutorBinding,
      signer_binding: (n.signer_binding ?? null) as SignerBinding | null,
      config: n.config,
      timeout_policy: n.timeout_policy,
      retryable: retryable.get(n.node_key) ?? false,
      position: n.position,
    })),
    edges: sortEdges(row.edges),
  };
}

// --- Template proposals (src/services/template-proposals.ts) ----------------------------------------

/**
 * Serializes every writer of one template key (proposals, system installs, finalizations) for the
 * rest of the caller's transaction, before any row of the key exists.
 */
export async function lockTemplateKey(client: Client, templateKey: string): Promise<void> {
  await client.query(`SELECT pg_advisory_xact_lock(hashtextextended('ferry.template:' || $1, 0))`, [templateKey]);
}

/** The version of a template with this graph hash, if one was ever finalized. */
export async function versionWithGraphHash(db: Queryable, templateKey: string, hash: string): Promise<number | null> {
  const { rows } = await db.query<{ version: number }>(
    `SELECT tv.version FROM template_versions tv JOIN plan_templates pt ON pt.id = tv.template_id
      WHERE pt.template_key = $1 AND tv.graph_hash = $2`,
    [templateKey, hash],
  );
  return rows[0]?.version ?? null;
}

/** The stored definition of a template's live (latest) version; null when it has none. */
export async function liveTemplateDefinition(db: Queryable, templateKey: string): Promise<TemplateDefinition | null> {
  const { rows } = await db.query<{ definition: TemplateDefinition }>(
    `SELECT tv.definition FROM template_versions tv JOIN plan_templates pt ON pt.id = tv.template_id
      WHERE pt.template_key = $1 AND tv.version = pt.latest_version`,
    [templateKey],
  );
  return rows[0]?.definition ?? null;
}
