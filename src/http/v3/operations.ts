import { z } from '@hono/zod-openapi';
import { confirmResolution, listResolutions, proposeResolution } from '../../services/resolutions.ts';
import { driftClasses, listDrifts, type DriftRow } from '../../persistence/reconciliation-drifts.ts';
import { resolutionKinds, type ResolutionRow } from '../../persistence/resolutions.ts';
import { jsonObjectSchema } from '../../plan/json.ts';
import { actorNames, type ActorNames } from '../actor-names.ts';
import { actorOf, resourceApp, type V3Context } from './context.ts';
import { conflict, forbidden, idParam, isoTime, jsonBody, jsonResponse, MovementIdParams, nodeKeySchema, notFound, printable } from './schemas.ts';
import { apiRoute, readRoute } from './route.ts';
import { iso, isoOrNull } from '../views.ts';

/**
 * Operations: the reconciliation drift report (GET /v3/reconciliation) and operators' resolutions of
 * movements in MANUAL_INTERVENTION (propose, then a second principal confirms). The schemas live
 * here, beside the only routes that use them.
 */

const DriftSchema = z
  .object({
    id: z.number().int(),
    movement_id: z.string(),
    node_id: z.string(),
    node_key: z.string(),
    attempt_no: z.number().int(),
    drift_class: z.enum(driftClasses),
    stored_state: z.string(),
    provider_state: z.string(),
    evidence: z.record(z.string(), z.unknown()),
    detected_at: isoTime,
    last_seen_at: isoTime,
    repaired_at: isoTime.nullable(),
    repaired_by: z.string().nullable(),
  })
  .openapi('ReconciliationDrift');

const ReconciliationSchema = z
  .object({ auto_repair: z.boolean(), lookback_seconds: z.number(), drifts: z.array(DriftSchema) })
  .openapi('Reconciliation');

const ReconciliationQuery = z.object({
  state: z.enum(['open', 'all']).default('open').openapi({ param: { name: 'state', in: 'query' }, description: 'open: not repaired (default); all' }),
});

const ResolutionSchema = z
  .object({
    id: z.string().openapi({ format: 'uuid' }),
    movement_id: z.string(),
    node_id: z.string(),
    node_key: z.string(),
    attempt_no: z.number().int(),
    resolution: z.enum(resolutionKinds),
    provider_ref: z.string().nullable(),
    reason: z.string(),
    evidence: z.record(z.string(), z.unknown()),
    status: z.enum(['proposed', 'applied', 'refused']),
    proposed_by: z.string(),
    proposed_by_name: z.string().openapi({ description: "The proposer's display name" }),
    proposed_at: isoTime,
    confirmed_by: z.string().nullable(),
    confirmed_by_name: z.string().nullable().openapi({ description: "The confirmer's display name" }),
    confirmed_at: isoTime.nullable(),
    refusal: z.string().nullable(),
  })
  .openapi('Resolution');

const ProposeBody = z
  .strictObject({
    node_key: nodeKeySchema,
    resolution: z.enum(resolutionKinds),
    provider_ref: printable(200).optional(),
    reason: printable(1000),
    evidence: jsonObjectSchema.optional(),
  })
  .openapi('ResolutionProposal');

const ResolutionParams = z.object({
  id: MovementIdParams.shape.id,
  resolution_id: idParam('resolution_id', 'Resolution id'),
});

const ConfirmedSchema = z
  .object({ resolution: ResolutionSchema, movement: z.object({ id: z.string(), state: z.string() }) })
  .openapi('ResolutionConfirmed');

const reconciliationRoute = readRoute({
  operationId: 'listReconciliationDrifts',
  path: '/reconciliation',
  tags: ['Workers'],
  summary: "Drift between stored node states and their providers' answers, found by the reconciliation sweep",
  request: { query: ReconciliationQuery },
  answer: ReconciliationSchema,
  shows: 'The drifts, newest first',
});

const listResolutionsRoute = readRoute({
  operationId: 'listMovementResolutions',
  path: '/movements/{id}/resolutions',
  tags: ['Movements'],
  summary: "The movement's proposed, applied and refused resolutions",
  request: { params: MovementIdParams },
  answer: z.object({ resolutions: z.array(ResolutionSchema) }),
  shows: 'Oldest first',
  errors: notFound,
});

const proposeRoute = apiRoute({
  operationId: 'proposeMovementResolution',
  method: 'post',
  path: '/movements/{id}/resolutions',
  tags: ['Movements'],
  summary: 'Propose how to settle an UNKNOWN or FAILED node of a MANUAL_INTERVENTION movement; a second principal confirms',
  permission: 'movement.operate',
  request: { params: MovementIdParams, body: jsonBody(ProposeBody) },
  responses: {
    201: jsonResponse(ResolutionSchema, 'Proposed; nothing is applied until confirmed'),
    ...notFound,
    ...conflict('The movement or node cannot take a resolution now, or one is already proposed (INVALID_TRANSITION, details.reason)'),
  },
});

const confirmRoute = apiRoute({
  operationId: 'confirmMovementResolution',
  method: 'post',
  path: '/movements/{id}/resolutions/{resolution_id}/confirm',
  tags: ['Movements'],
  summary: 'Confirm and apply a proposed resolution through the node and movement machines',
  permission: 'movement.operate',
  request: { params: ResolutionParams },
  responses: {
    200: jsonResponse(ConfirmedSchema, 'Applied'),
    ...forbidden('The proposer cannot confirm their own resolution (FOUR_EYES_VIOLATION)'),
    ...notFound,
    ...conflict('Not waiting for confirmation, or the node moved on and the machines refuse it (INVALID_TRANSITION, details.reason)'),
  },
});


function driftView(d: DriftRow) {
  return {
    id: d.id,
    movement_id: d.request_id,
    node_id: d.request_node_id,
    node_key: d.node_key,
    attempt_no: d.attempt_no,
    drift_class: d.drift_class,
    stored_state: d.stored_state,
    provider_state: d.provider_state,
    evidence: d.evidence,
    detected_at: iso(d.detected_at),
    last_seen_at: iso(d.last_seen_at),
    repaired_at: isoOrNull(d.repaired_at),
    repaired_by: d.repaired_by,
  };
}

const resolutionActors = (rows: ResolutionRow[]) => rows.flatMap((r) => [r.proposed_by, r.confirmed_by]);

function resolutionView(r: ResolutionRow, names: ActorNames) {
  return {
    id: r.id,
    movement_id: r.request_id,
    node_id: r.request_node_id,
    node_key: r.node_key,
    attempt_no: r.attempt_no,
    resolution: r.resolution,
    provider_ref: r.provider_ref,
    reason: r.reason,
    evidence: r.evidence,
    status: r.status,
    proposed_by: r.proposed_by,
    proposed_by_name: names(r.proposed_by),
    proposed_at: iso(r.proposed_at),
    confirmed_by: r.confirmed_by,
    confirmed_by_name: r.confirmed_by ? names(r.confirmed_by) : null,
    confirmed_at: isoOrNull(r.confirmed_at),
    refusal: r.refusal,
  };
}

export function operationsRoutes(ctx: V3Context) {
  const app = resourceApp();
  app.openapi(reconciliationRoute, async (c) => {
    const { state } = c.req.valid('query');
    const drifts = await listDrifts(ctx.pool, { open: state === 'open', limit: 500 });
    return c.json(
      { auto_repair: ctx.config.reconciliationAutoRepair, lookback_seconds: ctx.config.reconciliationLookbackSeconds, drifts: drifts.map(driftView) },
      200,
    );
  });
  app.openapi(listResolutionsRoute, async (c) => {
    const { id } = c.req.valid('param');
    const rows = await listResolutions(ctx, id);
    const names = await actorNames(ctx.pool, resolutionActors(rows));
    return c.json({ resolutions: rows.map((r) => resolutionView(r, names)) }, 200);
  });
  app.openapi(proposeRoute, async (c) => {
    const { id } = c.req.valid('param');
    const body = c.req.valid('json');
    const row = await proposeResolution(ctx, id, {
      actor: actorOf(c),
      nodeKey: body.node_key,
      resolution: body.resolution,
      providerRef: body.provider_ref ?? null,
      reason: body.reason,
      evidence: (body.evidence ?? {}) as Record<string, unknown>,
    });
    return c.json(resolutionView(row, await actorNames(ctx.pool, resolutionActors([row]))), 201);
  });
  app.openapi(confirmRoute, async (c) => {
    const { id, resolution_id } = c.req.valid('param');
    const { resolution, movement: { movement } } = await confirmResolution(ctx.movementDeps(), id, resolution_id, { actor: actorOf(c) });
    const names = await actorNames(ctx.pool, resolutionActors([resolution]));
    return c.json({ resolution: resolutionView(resolution, names), movement: { id: movement.id, state: movement.request_state } }, 200);
  });
  return app;
}
