import { principalActor, type PrincipalInfo } from '../../persistence/principals.ts';
import type { TokenInfo } from '../../persistence/tokens.ts';
import { createApiToken, createPrincipal, disablePrincipal, listApiTokens, listPrincipals, revokeApiToken } from '../../services/principals.ts';
import { actorOf, resourceApp, type V3Context } from './context.ts';
import {
  CreatePrincipalBody,
  CreateTokenBody,
  CreatedTokenSchema,
  PrincipalListQuery,
  PrincipalListSchema,
  PrincipalRefParams,
  PrincipalResultSchema,
  TokenListQuery,
  TokenListSchema,
  TokenRefParams,
  TokenResultSchema,
  jsonBody,
  jsonResponse,
  notFound,
} from './schemas.ts';
import { apiRoute, readRoute } from './route.ts';

/**
 * Who may act: principals and their tokens, for admins (token.admin). Every change goes through the
 * service in src/services/principals.ts, which writes the audit event in the same transaction. A
 * token's secret appears once, in the answer that creates it.
 */

const tags = ['Principals'];

const createPrincipalRoute = apiRoute({
  method: 'post',
  path: '/principals',
  tags,
  summary: 'Create a principal: a person or a service that holds tokens (audited)',
  permission: 'token.admin',
  request: { body: jsonBody(CreatePrincipalBody) },
  responses: { 201: jsonResponse(PrincipalResultSchema, 'The new principal') },
});

const listPrincipalsRoute = readRoute({
  path: '/principals',
  tags,
  summary: 'Every principal, by name',
  permission: 'token.admin',
  request: { query: PrincipalListQuery },
  answer: PrincipalListSchema,
  shows: 'The principals (disabled ones with include_disabled=true)',
});

const disablePrincipalRoute = apiRoute({
  method: 'post',
  path: '/principals/{principal}/disable',
  tags,
  summary: 'Disable a principal: each of its tokens is refused from now on (audited)',
  permission: 'token.admin',
  request: { params: PrincipalRefParams },
  responses: { 200: jsonResponse(PrincipalResultSchema, 'The disabled principal'), ...notFound },
});

const createTokenRoute = apiRoute({
  method: 'post',
  path: '/tokens',
  tags,
  summary: 'Create a token of a principal; its secret is in this answer only (audited)',
  permission: 'token.admin',
  request: { body: jsonBody(CreateTokenBody) },
  responses: { 201: jsonResponse(CreatedTokenSchema, 'The token and, once, its secret'), ...notFound },
});

const listTokensRoute = readRoute({
  path: '/tokens',
  tags,
  summary: 'Every token with its principal (never a secret or hash)',
  permission: 'token.admin',
  request: { query: TokenListQuery },
  answer: TokenListSchema,
  shows: 'The tokens, oldest first (revoked ones with include_revoked=true)',
  errors: notFound,
});

const revokeTokenRoute = apiRoute({
  method: 'post',
  path: '/tokens/{token}/revoke',
  tags,
  summary: 'Revoke a token by id or name (audited)',
  permission: 'token.admin',
  request: { params: TokenRefParams },
  responses: { 200: jsonResponse(TokenResultSchema, 'The revoked token'), ...notFound },
});

function principalView(p: PrincipalInfo) {
  return {
    id: p.id,
    name: p.name,
    kind: p.kind,
    actor: principalActor(p.id),
    created_at: p.created_at.toISOString(),
    disabled_at: p.disabled_at?.toISOString() ?? null,
  };
}

function tokenView(t: TokenInfo) {
  return {
    id: t.id,
    name: t.name,
    role: t.role,
    principal_id: t.principal_id,
    principal_name: t.principal_name,
    created_at: t.created_at.toISOString(),
    last_used_at: t.last_used_at?.toISOString() ?? null,
    expires_at: t.expires_at?.toISOString() ?? null,
    revoked_at: t.revoked_at?.toISOString() ?? null,
  };
}

export function principalRoutes(ctx: V3Context) {
  const app = resourceApp();

  app.openapi(createPrincipalRoute, async (c) => {
    const principal = await createPrincipal(ctx.pool, c.req.valid('json'), actorOf(c));
    return c.json({ principal: principalView(principal) }, 201);
  });

  app.openapi(listPrincipalsRoute, async (c) => {
    const q = c.req.valid('query');
    const principals = await listPrincipals(ctx.pool, { includeDisabled: q.include_disabled === 'true' });
    return c.json({ principals: principals.map(principalView) }, 200);
  });

  app.openapi(disablePrincipalRoute, async (c) => {
    const principal = await disablePrincipal(ctx.pool, c.req.valid('param').principal, actorOf(c));
    return c.json({ principal: principalView(principal) }, 200);
  });

  app.openapi(createTokenRoute, async (c) => {
    const body = c.req.valid('json');
    const created = await createApiToken(
      ctx.pool,
      { principal: body.principal, role: body.role, name: body.name, expiresAt: body.expires_at === undefined ? null : new Date(body.expires_at) },
      actorOf(c),
    );
    return c.json({ token: tokenView(created), secret: created.token }, 201);
  });

  app.openapi(listTokensRoute, async (c) => {
    const q = c.req.valid('query');
    const tokens = await listApiTokens(ctx.pool, { includeRevoked: q.include_revoked === 'true', principal: q.principal });
    return c.json({ tokens: tokens.map(tokenView) }, 200);
  });

  app.openapi(revokeTokenRoute, async (c) => {
    const token = await revokeApiToken(ctx.pool, c.req.valid('param').token, actorOf(c));
    return c.json({ token: tokenView(token) }, 200);
  });

  return app;
}
