import { z } from '@hono/zod-openapi';
import { confirmGate, GATE_NOTE_MAX, skipGate } from '../../services/gates.ts';
import type { Movement } from '../../services/movements.ts';
import { listSigners } from '../../persistence/registry.ts';
import { actorNames, movementActors } from '../actor-names.ts';
import { effectDisplay, movementDetailView, type Audience } from '../views.ts';
import { actorOf, audienceOf, resourceApp, type V3Context } from './context.ts';
import { conflict, forbidden, jsonBody, jsonResponse, MovementDetailSchema, MovementIdParams, nodeKeySchema, notFound } from './schemas.ts';
import { apiRoute } from './route.ts';

/**
 * Manual gates (src/services/gates.ts): a person other than the movement's requester (and, when the
 * gate says so, other than its approvers) confirms a READY gate with a note, or skips it with a
 * reason. The schemas live here, beside the only routes that use them.
 */

const GateParams = z.object({
  id: MovementIdParams.shape.id,
  node_key: nodeKeySchema.openapi({ param: { name: 'node_key', in: 'path' }, description: "The gate's node_key" }),
});

const text = z.string().min(1).max(GATE_NOTE_MAX);
const ConfirmGateBody = z.strictObject({ note: text.openapi({ description: 'What the person checked before confirming; kept in the audit log and the transition' }) }).openapi('GateConfirmRequest');
const SkipGateBody = z.strictObject({ reason: text.openapi({ description: 'Why the gate is skipped; kept in the audit log and the transition' }) }).openapi('GateSkipRequest');

const tags = ['Movements'];
const refusals = {
  ...forbidden(
    'The role lacks movement.operate (FORBIDDEN), or the caller requested the movement, or approved it and the gate excludes approvers (FOUR_EYES_VIOLATION, details.reason GATE_BY_REQUESTER / GATE_BY_APPROVER)',
  ),
  ...notFound,
  ...conflict('The node is not a manual gate, is not READY, or the movement is not running (INVALID_TRANSITION, details.reason)'),
};

const confirmRoute = apiRoute({
  method: 'post',
  path: '/movements/{id}/gates/{node_key}/confirm',
  operationId: 'confirmGate',
  tags,
  summary: 'Confirm a READY manual gate with a note: the gate is COMPLETED and the plan goes on',
  permission: 'movement.operate',
  request: { params: GateParams, body: jsonBody(ConfirmGateBody) },
  responses: { 200: jsonResponse(MovementDetailSchema, 'The gate is COMPLETED; audited (movement.gate.confirm), callback manual_gate_confirmed'), ...refusals },
});

const skipRoute = apiRoute({
  method: 'post',
  path: '/movements/{id}/gates/{node_key}/skip',
  operationId: 'skipGate',
  tags,
  summary: 'Skip a READY manual gate with a reason: the gate is SKIPPED and the plan goes on',
  permission: 'movement.operate',
  request: { params: GateParams, body: jsonBody(SkipGateBody) },
  responses: { 200: jsonResponse(MovementDetailSchema, 'The gate is SKIPPED; audited (movement.gate.skip), callback manual_gate_skipped'), ...refusals },
});

export function gateRoutes(ctx: V3Context) {
  const app = resourceApp();
  const detail = async (m: Movement, audience: Audience) =>
    movementDetailView(m, audience, await actorNames(ctx.pool, movementActors(m.movement)), effectDisplay(ctx.config, await listSigners(ctx.pool)));

  app.openapi(confirmRoute, async (c) => {
    const { id, node_key } = c.req.valid('param');
    const { note } = c.req.valid('json');
    return c.json(await detail(await confirmGate(ctx.movementDeps(), id, { actor: actorOf(c), nodeKey: node_key, note }), audienceOf(c)), 200);
  });

  app.openapi(skipRoute, async (c) => {
    const { id, node_key } = c.req.valid('param');
    const { reason } = c.req.valid('json');
    return c.json(await detail(await skipGate(ctx.movementDeps(), id, { actor: actorOf(c), nodeKey: node_key, note: reason }), audienceOf(c)), 200);
  });

  return app;
}
