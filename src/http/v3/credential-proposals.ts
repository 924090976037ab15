import type { z } from '@hono/zod-openapi';
import type { CredentialProposalRow } from '../../persistence/credential-proposals.ts';
import {
  confirmCredentialProposal,
  credentialProposalDetail,
  listCredentialProposalRows,
  rejectCredentialProposal,
  type CredentialDeps,
} from '../../services/credential-proposals.ts';
import { actorNames, type ActorNames } from '../actor-names.ts';
import { iso, isoOrNull } from '../views.ts';
import { actorOf, resourceApp, type V3Context } from './context.ts';
import { principalView, tokenView } from './principals.ts';
import {
  CredentialConfirmedSchema,
  CredentialProposalIdParams,
  CredentialProposalListQuery,
  CredentialProposalListSchema,
  CredentialProposalResultSchema,
  CredentialProposalSchema,
  EmptyBody,
  RejectCredentialBody,
  conflict,
  forbidden,
  jsonBody,
  jsonResponse,
  notFound,
} from './schemas.ts';
import { apiRoute, readRoute } from './route.ts';

/**
 * Credential proposals (token.admin): a principal, a token for someone else, or a token of a role
 * that decides, proposed by one admin (POST /v3/principals, POST /v3/tokens answer 202) and made
 * only when a second principal confirms. The confirming answer carries a token's secret, once.
 */

const tags = ['Principals'];

export function credentialProposalView(p: CredentialProposalRow, names: ActorNames): z.infer<typeof CredentialProposalSchema> {
  return {
    id: p.id,
    operation: p.operation,
    subject: p.subject,
    request: p.request as z.infer<typeof CredentialProposalSchema>['request'],
    state: p.proposal_state as z.infer<typeof CredentialProposalSchema>['state'],
    proposed_by: p.proposed_by,
    proposed_by_name: names(p.proposed_by),
    review_expires_at: iso(p.review_expires_at),
    decided_by: p.decided_by,
    decided_by_name: p.decided_by ? names(p.decided_by) : null,
    decided_at: isoOrNull(p.decided_at),
    reason: p.reason,
    result_id: p.result_id,
    created_at: iso(p.created_at),
    updated_at: iso(p.updated_at),
  };
}

export const proposalActors = (p: CredentialProposalRow) => [p.proposed_by, p.decided_by];

const listRoute = readRoute({
  operationId: 'listCredentialProposals',
  path: '/credential-proposals',
  tags,
  summary: 'Credential proposals, newest first (filter by state)',
  permission: 'token.admin',
  request: { query: CredentialProposalListQuery },
  answer: CredentialProposalListSchema,
  shows: 'The proposals',
});

const showRoute = readRoute({
  operationId: 'getCredentialProposal',
  path: '/credential-proposals/{id}',
  tags,
  summary: 'One credential proposal',
  permission: 'token.admin',
  request: { params: CredentialProposalIdParams },
  answer: CredentialProposalResultSchema,
  shows: 'The proposal',
  errors: notFound,
});

const confirmRoute = apiRoute({
  operationId: 'confirmCredentialProposal',
  method: 'post',
  path: '/credential-proposals/{id}/confirm',
  tags,
  summary: 'Confirm a credential proposal (never its proposer): the principal or token is created; a token secret is in this answer only',
  permission: 'token.admin',
  request: { params: CredentialProposalIdParams, body: jsonBody(EmptyBody, false) },
  responses: {
    200: jsonResponse(CredentialConfirmedSchema, 'The proposal, now CONFIRMED, and what it created'),
    ...forbidden('The role lacks token.admin (FORBIDDEN), or this principal proposed it (FOUR_EYES_VIOLATION)'),
    ...notFound,
    ...conflict('The review window closed (REVIEW_WINDOW_CLOSED; the proposal is EXPIRED) or it was decided already (PROPOSAL_STATE_CONFLICT)'),
  },
});

const rejectRoute = apiRoute({
  operationId: 'rejectCredentialProposal',
  method: 'post',
  path: '/credential-proposals/{id}/reject',
  tags,
  summary: 'Reject a credential proposal (its proposer withdraws it the same way); nothing is created',
  permission: 'token.admin',
  request: { params: CredentialProposalIdParams, body: jsonBody(RejectCredentialBody, false) },
  responses: {
    200: jsonResponse(CredentialProposalResultSchema, 'The proposal, now REJECTED'),
    ...notFound,
    ...conflict('The proposal was decided already (PROPOSAL_STATE_CONFLICT)'),
  },
});

export function credentialProposalRoutes(ctx: V3Context) {
  const app = resourceApp();
  const deps = (): CredentialDeps => ({ pool: ctx.pool, config: ctx.config });
  const one = async (p: CredentialProposalRow) => credentialProposalView(p, await actorNames(ctx.pool, proposalActors(p)));

  app.openapi(listRoute, async (c) => {
    const q = c.req.valid('query');
    const rows = await listCredentialProposalRows(ctx.pool, { state: q.state, limit: q.limit });
    const names = await actorNames(ctx.pool, rows.flatMap(proposalActors));
    return c.json({ proposals: rows.map((p) => credentialProposalView(p, names)) }, 200);
  });

  app.openapi(showRoute, async (c) => {
    const d = await credentialProposalDetail(ctx.pool, c.req.valid('param').id);
    return c.json({ proposal: await one(d.proposal) }, 200);
  });

  app.openapi(confirmRoute, async (c) => {
    const r = await confirmCredentialProposal(deps(), c.req.valid('param').id, actorOf(c));
    return c.json(
      {
        proposal: await one(r.proposal),
        ...(r.principal ? { principal: principalView(r.principal) } : {}),
        ...(r.token ? { token: tokenView(r.token), secret: r.token.token } : {}),
      },
      200,
    );
  });

  app.openapi(rejectRoute, async (c) => {
    const body = (c.req.valid('json') ?? {}) as { reason?: string };
    return c.json({ proposal: await one(await rejectCredentialProposal(deps(), c.req.valid('param').id, actorOf(c), body.reason ?? null)) }, 200);
  });

  return app;
}
