import { createRoute, type RouteConfig } from '@hono/zod-openapi';
import type { z } from '@hono/zod-openapi';
import type { Permission } from '../../services/permissions.ts';
import { permitted } from '../auth.ts';
import { bearerSecurity, commonErrors, jsonResponse } from './schemas.ts';

/**
 * What every /v3 route declares alike, said once: the bearer token, the permission (enforced by
 * middleware and published as `x-ferry-permission`) and the error answers any route can give. A
 * route names its own answers only.
 */
export type ApiRouteConfig = Omit<RouteConfig, 'security' | 'middleware' | 'operationId'> & {
  permission: Permission;
  /** The operation's name in generated clients (createMovement, listMovements, ...): required, unique. */
  operationId: string;
};

export function apiRoute<const R extends ApiRouteConfig>(route: R) {
  const { permission, responses, ...rest } = route;
  return createRoute({
    ...rest,
    security: bearerSecurity,
    ...permitted(permission as R['permission']),
    // A route's own answer for a status (a 403 that names FOUR_EYES_VIOLATION) wins over the common one.
    responses: { ...commonErrors, ...(responses as R['responses']) },
  });
}

type Request = NonNullable<RouteConfig['request']>;

/**
 * A read: GET answering 200 with `answer` (what it `shows`, in the document), 'read' unless said
 * otherwise, with the route's own error answers (a 404, say) beside the common ones.
 */
export function readRoute<
  const P extends string,
  const S extends z.ZodType,
  const Req extends Request = {},
  const E extends RouteConfig['responses'] = {},
>(route: { path: P; operationId: string; tags: string[]; summary: string; request?: Req; answer: S; shows: string; errors?: E; permission?: Permission }) {
  return apiRoute({
    method: 'get',
    path: route.path,
    operationId: route.operationId,
    tags: route.tags,
    summary: route.summary,
    permission: route.permission ?? 'read',
    request: (route.request ?? {}) as Req,
    responses: { 200: jsonResponse(route.answer, route.shows), ...((route.errors ?? {}) as E) },
  });
}

/** A page of a list: a read whose query has a `limit` and, for paged lists, a `cursor`. */
export function pageRoute<const P extends string, const Q extends z.ZodObject, const S extends z.ZodType>(route: {
  path: P;
  operationId: string;
  tags: string[];
  summary: string;
  query: Q;
  page: S;
  shows: string;
}) {
  return readRoute({ path: route.path, operationId: route.operationId, tags: route.tags, summary: route.summary, request: { query: route.query }, answer: route.page, shows: route.shows });
}
