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
export type ApiRouteConfig = Omit<RouteConfig, 'security' | 'middleware'> & { permission: Permission };

export function apiRoute<const R extends ApiRouteConfig>(route: R) {
  const { permission, responses, ...rest } = route;
  return createRoute({
    ...rest,
    security: bearerSecurity,
    ...permitted(permission as R['permission']),
    responses: { ...(responses as R['responses']), ...commonErrors },
  });
}

/**
 * A page of a list: GET with a query (a `limit` and, for paged lists, a `cursor`) answering one page, 'read'
 * unless said otherwise.
 */
export function pageRoute<const Q extends z.ZodObject, const S extends z.ZodType, const P extends string>(route: {
  path: P;
  tags: string[];
  summary: string;
  query: Q;
  page: S;
  description: string;
  permission?: Permission;
}) {
  return apiRoute({
    method: 'get',
    path: route.path,
    tags: route.tags,
    summary: route.summary,
    permission: route.permission ?? 'read',
    request: { query: route.query },
    responses: { 200: jsonResponse(route.page, route.description) },
  });
}
