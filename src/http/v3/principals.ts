import { principalActor, type PrincipalInfo } from '../../persistence/principals.ts';
import type { TokenInfo } from '../../persistence/tokens.ts';
import { proposePrincipal, requestToken } from '../../services/credential-proposals.ts';
import { disablePrincipal, listApiTokens, listPrincipals, revokeApiToken } from '../../services/principals.ts';
import { actorNames } from '../actor-names.ts';
import { actorOf, resourceApp, type V3Context } from './context.ts';
import { credentialProposalView, proposalActors } from './credential-proposals.ts';
import {
  CreatePrincipalBody,
  CredentialProposalResultSchema,
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
 * Who may act: principals and their tokens, for admins (token.admin). Every change goes through a
 * service, which writes the audit event in the same transaction. Creating a principal, a token for
 * someone else, or a token of a role that approves or administers is proposed (202) for a second
 * admin to confirm (/v3/credential-proposals, src/services/credential-proposals.ts); a token of
 * one's own that decides nothing is made at once (201). A token's secret appears once, in the
 * answer that creates it.
 */

const tags = ['Principals'];

const createPrincipalRoute = apiRoute({
  operationId: 'createPrincipal',
  method: 'post',
  path: '/principals',
  tags,
  summary: 'Propose a principal (a person or a service that holds tokens); a second admin confirms it (audited)',
  permission: 'token.admin',
  request: { body: jsonBody(CreatePrincipalBody) },
  responses: { 202: jsonResponse(CredentialProposalResultSchema, 'The proposal; the principal exists once another admin confirms it') },
});

const listPrincipalsRoute = readRoute({
  operationId: 'listPrincipals',
  path: '/principals',
  tags,
  summary: 'Every principal, by name',
  permission: 'token.admin',
  request: { query: PrincipalListQuery },
  answer: PrincipalListSchema,
  shows: 'The principals (disabled ones with include_disabled=true)',
});

const disablePrincipalRoute = apiRoute({
  operationId: 'disablePrincipal',
  method: 'post',
  path: '/principals/{principal}/disable',
  tags,
  summary: 'Disable a principal: each of its tokens is refused from now on (audited)',
  permission: 'token.admin',
  request: { params: PrincipalRefParams },
  responses: { 200: jsonResponse(PrincipalResultSchema, 'The disabled principal'), ...notFound },
});

const createTokenRoute = apiRoute({
  operationId: 'createToken',
  method: 'post',
  path: '/tokens',
  tags,
  summary: "Create a token of one's own principal whose role decides nothing (201), or propose any other token for a second admin (202) (audited)",
  permission: 'token.admin',
  request: { body: jsonBody(CreateTokenBody) },
  responses: {
    201: jsonResponse(CreatedTokenSchema, 'The token and, once, its secret'),
    202: jsonResponse(CredentialProposalResultSchema, 'The proposal; the token is made, and its secret shown, when another admin confirms it'),
    ...notFound,
  },
});

const listTokensRoute = readRoute({
  operationId: 'listTokens',
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
  operationId: 'revokeToken',
  method: 'post',
  path: '/tokens/{token}/revoke',
  tags,
  summary: 'Revoke a token by id or name (audited)',
  permission: 'token.admin',
  request: { params: TokenRefParams },
  responses: { 200: jsonResponse(TokenResultSchema, 'The revoked token'), ...notFound },
});

export function principalView(p: PrincipalInfo) {
  return {
    id: p.id,
    name: p.name,
    kind: p.kind,
    actor: principalActor(p.id),
    created_at: p.created_at.toISOString(),
    disabled_at: p.disabled_at?.toISOString() ?? null,
  };
}

export function tokenView(t: TokenInfo) {
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

  const deps = () => ({ pool: ctx.pool, config: ctx.config });
  const proposed = async (p: Parameters<typeof credentialProposalView>[0]) => ({
    proposal: credentialProposalView(p, await actorNames(ctx.pool, proposalActors(p))),
  });

  app.openapi(createPrincipalRoute, async (c) => {
    const proposal = await proposePrincipal(deps(), c.req.valid('json'), actorOf(c));
    return c.json(await proposed(proposal), 202);
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
    const r = await requestToken(
      deps(),
      { principal: body.principal, role: body.role, name: body.name, expiresAt: body.expires_at === undefined ? null : new Date(body.expires_at) },
      { actor: actorOf(c), principalId: c.get('principal').principalId },
    );
    if (r.outcome === 'proposed') return c.json(await proposed(r.proposal), 202);
    return c.json({ token: tokenView(r.token), secret: r.token.token }, 201);
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
