import type { z } from '@hono/zod-openapi';
import {
  approveProposal,
  challengeProposal,
  proposalDetail,
  withdrawProposal,
  type ProposalDeps,
} from '../../services/template-proposals.ts';
import { listProposals, type ProposalRow } from '../../persistence/template-proposals.ts';
import { diffTemplates } from '../../plan/diff.ts';
import { liveTemplateDefinition } from '../../persistence/templates.ts';
import { actorNames, type ActorNames } from '../actor-names.ts';
import { actorOf, resourceApp, type V3Context } from './context.ts';
import {
  ChallengeBody,
  EmptyBody,
  ProposalDetailSchema,
  ProposalIdParams,
  ProposalListQuery,
  ProposalListSchema,
  ProposalSchema,
  conflict,
  forbidden,
  jsonBody,
  jsonResponse,
  notFound,
} from './schemas.ts';
import { apiRoute, pageRoute, readRoute } from './route.ts';
import { iso, isoOrNull } from '../views.ts';

const tags = ['Template proposals'];

export function proposalView(p: ProposalRow, names: ActorNames): z.infer<typeof ProposalSchema> {
  return {
    id: p.id,
    template_key: p.template_key,
    state: p.proposal_state as z.infer<typeof ProposalSchema>['state'],
    base_version: p.base_version,
    graph_hash: p.graph_hash,
    system: p.system,
    proposed_by: p.proposed_by,
    proposed_by_name: names(p.proposed_by),
    review_expires_at: iso(p.review_expires_at),
    approved_by: p.approved_by,
    approved_by_name: p.approved_by ? names(p.approved_by) : null,
    approved_at: isoOrNull(p.approved_at),
    challenge_ends_at: isoOrNull(p.challenge_ends_at),
    decided_by: p.decided_by,
    decided_by_name: p.decided_by ? names(p.decided_by) : null,
    reason: p.reason,
    finalized_version: p.finalized_version,
    created_at: iso(p.created_at),
    updated_at: iso(p.updated_at),
  };
}

const actorsOf = (p: ProposalRow) => [p.proposed_by, p.approved_by, p.decided_by];

const listRoute = pageRoute({
  operationId: 'listTemplateProposals',
  path: '/template-proposals',
  tags,
  summary: 'Template proposals, newest first (filter by state or template)',
  query: ProposalListQuery,
  page: ProposalListSchema,
  shows: 'The proposals',
});

const showRoute = readRoute({
  operationId: 'getTemplateProposal',
  path: '/template-proposals/{id}',
  tags,
  summary: 'A proposal with its definition, its diff against the live version and its transition history',
  request: { params: ProposalIdParams },
  answer: ProposalDetailSchema,
  shows: 'The proposal',
  errors: notFound,
});

const decided = (what: string) => jsonResponse(ProposalSchema, `The proposal, now ${what}`);

const approveRoute = apiRoute({
  operationId: 'approveTemplateProposal',
  method: 'post',
  path: '/template-proposals/{id}/approve',
  tags,
  summary: 'Approve a proposal (never its proposer); its challenge window starts',
  permission: 'template.approve',
  request: { params: ProposalIdParams, body: jsonBody(EmptyBody, false) },
  responses: {
    200: decided('APPROVED'),
    ...forbidden('The role lacks template.approve (FORBIDDEN), or this token proposed it (FOUR_EYES_VIOLATION)'),
    ...notFound,
    ...conflict('The review window closed (REVIEW_WINDOW_CLOSED) or the proposal is no longer PROPOSED (PROPOSAL_STATE_CONFLICT)'),
  },
});

const challengeRoute = apiRoute({
  operationId: 'challengeTemplateProposal',
  method: 'post',
  path: '/template-proposals/{id}/challenge',
  tags,
  summary: 'Challenge an approved proposal within its challenge window, with a reason; it never becomes live',
  permission: 'template.challenge',
  request: { params: ProposalIdParams, body: jsonBody(ChallengeBody) },
  responses: {
    200: decided('CHALLENGED'),
    ...notFound,
    ...conflict('The challenge window closed (CHALLENGE_WINDOW_CLOSED) or the proposal was finalized, withdrawn or challenged first (PROPOSAL_STATE_CONFLICT)'),
  },
});

const withdrawRoute = apiRoute({
  operationId: 'withdrawTemplateProposal',
  method: 'post',
  path: '/template-proposals/{id}/withdraw',
  tags,
  summary: 'Withdraw an open proposal (its proposer only)',
  permission: 'template.write',
  request: { params: ProposalIdParams, body: jsonBody(EmptyBody, false) },
  responses: {
    200: decided('WITHDRAWN'),
    ...forbidden('The role lacks template.write (FORBIDDEN), or this token did not propose it (NOT_PROPOSER)'),
    ...notFound,
    ...conflict('The proposal is no longer open (PROPOSAL_STATE_CONFLICT)'),
  },
});

export function templateProposalRoutes(ctx: V3Context) {
  const app = resourceApp();
  const deps = (): ProposalDeps => ({ pool: ctx.pool, config: ctx.config });
  const one = async (p: ProposalRow) => proposalView(p, await actorNames(ctx.pool, actorsOf(p)));

  app.openapi(listRoute, async (c) => {
    const q = c.req.valid('query');
    const page = await listProposals(ctx.pool, { state: q.state, templateKey: q.template_key, limit: q.limit, cursor: q.cursor });
    const names = await actorNames(ctx.pool, page.proposals.flatMap(actorsOf));
    return c.json({ proposals: page.proposals.map((p) => proposalView(p, names)), next_cursor: page.nextCursor }, 200);
  });

  app.openapi(showRoute, async (c) => {
    const { id } = c.req.valid('param');
    const d = await proposalDetail(ctx.pool, id);
    const names = await actorNames(ctx.pool, [...actorsOf(d.proposal), ...d.history.map((t) => t.actor)]);
    const liveDefinition = d.live ? await liveTemplateDefinition(ctx.pool, d.proposal.template_key) : null;
    return c.json(
      {
        proposal: proposalView(d.proposal, names),
        definition: d.proposal.definition as unknown as Record<string, unknown>,
        live_version: d.live?.version ?? null,
        diff: diffTemplates(liveDefinition, d.proposal.definition) as unknown as Record<string, unknown>,
        history: d.history.map((t) => ({
          seq: t.seq,
          from: t.from_state,
          to: t.to_state,
          event: t.event_type,
          payload: t.event_payload,
          actor: t.actor,
          actor_name: names(t.actor),
          at: iso(t.at),
        })),
        replay: d.replay.ok ? { ok: true, state: d.replay.value, reason: null } : { ok: false, state: null, reason: d.replay.reason },
      },
      200,
    );
  });

  app.openapi(approveRoute, async (c) => {
    const { id } = c.req.valid('param');
    return c.json(await one(await approveProposal(deps(), id, actorOf(c))), 200);
  });

  app.openapi(challengeRoute, async (c) => {
    const { id } = c.req.valid('param');
    const { reason } = c.req.valid('json');
    return c.json(await one(await challengeProposal(deps(), id, actorOf(c), reason)), 200);
  });

  app.openapi(withdrawRoute, async (c) => {
    const { id } = c.req.valid('param');
    return c.json(await one(await withdrawProposal(deps(), id, actorOf(c))), 200);
  });

  return app;
}
