import type { z } from '@hono/zod-openapi';
import { NotFoundError, ValidationError } from '../../errors.ts';
import { findPrincipal, principalActor } from '../../persistence/principals.ts';
import { listAddressBook, liveRuleSet, type AddressBookRow, type PolicyProposalRow } from '../../persistence/policy.ts';
import { getTemplateVersion } from '../../persistence/templates.ts';
import {
  approvePolicyProposal,
  challengePolicyProposal,
  listPolicyProposalRows,
  policyProposalDetail,
  proposeBookEntry,
  proposeBookRemoval,
  proposeRuleSet,
  rejectPolicyProposal,
  settleDuePolicyProposals,
  testPolicy,
  withdrawPolicyProposal,
  finalizePolicyProposal,
  type PolicyDeps,
} from '../../services/policy.ts';
import { priceSourceOf } from '../../prices/chainlink.ts';
import { actorNames, type ActorNames } from '../actor-names.ts';
import { iso, isoOrNull } from '../views.ts';
import { actorOf, resourceApp, type V3Context } from './context.ts';
import {
  BookEntryBody,
  BookEntryParams,
  BookSchema,
  EmptyBody,
  LiveRuleSetSchema,
  PolicyProposalDetailSchema,
  PolicyProposalIdParams,
  PolicyProposalListQuery,
  PolicyProposalListSchema,
  PolicyProposalSchema,
  PolicyReasonBody,
  PolicyTestBody,
  PolicyTestSchema,
  RuleSetBody,
  conflict,
  forbidden,
  jsonBody,
  jsonResponse,
  notFound,
  unprocessable,
} from './schemas.ts';
import { apiRoute, readRoute } from './route.ts';

/**
 * The treasury policy (docs/policy.md): the address book and the rule set, read by anyone, changed
 * only through policy proposals (policy.write proposes, a second principal with policy.approve
 * approves, and the change is live after its cool-down unless challenged).
 */

const tags = ['Policy'];

export function policyProposalView(p: PolicyProposalRow, names: ActorNames): z.infer<typeof PolicyProposalSchema> {
  return {
    id: p.id,
    subject_kind: p.subject_kind,
    subject: p.subject,
    change: p.change as unknown as Record<string, unknown>,
    state: p.proposal_state as z.infer<typeof PolicyProposalSchema>['state'],
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
    result_version: p.result_version,
    created_at: iso(p.created_at),
    updated_at: iso(p.updated_at),
  };
}

const entryView = (e: AddressBookRow): z.infer<typeof BookSchema>['entries'][number] => ({
  name: e.name,
  network: e.network,
  address: e.address,
  tag: e.tag,
  owner: e.owner,
  kind: e.kind,
  notes: e.notes,
  version: e.version,
  proposal_id: e.proposal_id,
  updated_at: iso(e.updated_at),
});

const actorsOf = (p: PolicyProposalRow) => [p.proposed_by, p.approved_by, p.decided_by];
const proposed = (what: string) => jsonResponse(PolicyProposalSchema, `${what}: a PROPOSED policy proposal, live once another principal approves it and its cool-down passes`);
const alreadyOpen = conflict('The subject already has an open proposal (PROPOSAL_ALREADY_OPEN)');

const bookRoute = readRoute({ path: '/policy/address-book', operationId: 'getAddressBook', tags, summary: 'The address book: named destinations', answer: BookSchema, shows: 'Every entry, by name' });

const proposeEntryRoute = apiRoute({
  method: 'post',
  path: '/policy/address-book',
  operationId: 'proposeAddressBookEntry',
  tags,
  summary: 'Propose a new or changed address book entry',
  permission: 'policy.write',
  request: { body: jsonBody(BookEntryBody) },
  responses: {
    202: proposed('The entry'),
    ...alreadyOpen,
    ...unprocessable('Another entry already has this destination (POLICY_INVALID)'),
  },
});

const proposeRemovalRoute = apiRoute({
  method: 'post',
  path: '/policy/address-book/{name}/remove',
  operationId: 'proposeAddressBookRemoval',
  tags,
  summary: 'Propose removing an address book entry',
  permission: 'policy.write',
  request: { params: BookEntryParams, body: jsonBody(EmptyBody, false) },
  responses: { 202: proposed('The removal'), ...notFound, ...alreadyOpen },
});

const rulesRoute = readRoute({ path: '/policy/rules', operationId: 'getPolicyRules', tags, summary: 'The live rule set and velocity limits', answer: LiveRuleSetSchema, shows: 'The live version' });

const proposeRulesRoute = apiRoute({
  method: 'post',
  path: '/policy/rules',
  operationId: 'proposePolicyRules',
  tags,
  summary: 'Propose a new rule set version (rules, first match wins, and velocity limits)',
  permission: 'policy.write',
  request: { body: jsonBody(RuleSetBody) },
  responses: {
    202: proposed('The rule set'),
    ...alreadyOpen,
    ...unprocessable('The rules contradict themselves (POLICY_INVALID; details.problems lists every problem)'),
  },
});

const listRoute = readRoute({
  path: '/policy/proposals',
  operationId: 'listPolicyProposals',
  tags,
  summary: 'Policy proposals, newest first',
  request: { query: PolicyProposalListQuery },
  answer: PolicyProposalListSchema,
  shows: 'The proposals',
});

const showRoute = readRoute({
  path: '/policy/proposals/{id}',
  operationId: 'getPolicyProposal',
  tags,
  summary: 'A policy proposal with its history',
  request: { params: PolicyProposalIdParams },
  answer: PolicyProposalDetailSchema,
  shows: 'The proposal',
  errors: notFound,
});

const decided = (what: string) => jsonResponse(PolicyProposalSchema, `The proposal, now ${what}`);

const approveRoute = apiRoute({
  method: 'post',
  path: '/policy/proposals/{id}/approve',
  operationId: 'approvePolicyProposal',
  tags,
  summary: 'Approve a policy proposal (never its proposer); its cool-down starts',
  permission: 'policy.approve',
  request: { params: PolicyProposalIdParams, body: jsonBody(EmptyBody, false) },
  responses: {
    200: decided('APPROVED'),
    ...forbidden('The role lacks policy.approve (FORBIDDEN), or this principal proposed it (FOUR_EYES_VIOLATION)'),
    ...notFound,
    ...conflict('The review window closed (REVIEW_WINDOW_CLOSED) or the proposal is no longer PROPOSED (PROPOSAL_STATE_CONFLICT)'),
  },
});

const challengeRoute = apiRoute({
  method: 'post',
  path: '/policy/proposals/{id}/challenge',
  operationId: 'challengePolicyProposal',
  tags,
  summary: 'Challenge an approved policy proposal within its cool-down, with a reason; it never goes live',
  permission: 'policy.approve',
  request: { params: PolicyProposalIdParams, body: jsonBody(PolicyReasonBody) },
  responses: {
    200: decided('CHALLENGED'),
    ...notFound,
    ...conflict('The cool-down is over (CHALLENGE_WINDOW_CLOSED) or the proposal is not APPROVED (PROPOSAL_STATE_CONFLICT)'),
  },
});

const rejectRoute = apiRoute({
  method: 'post',
  path: '/policy/proposals/{id}/reject',
  operationId: 'rejectPolicyProposal',
  tags,
  summary: 'Reject a proposed policy change before anyone approves it, with a reason',
  permission: 'policy.approve',
  request: { params: PolicyProposalIdParams, body: jsonBody(PolicyReasonBody) },
  responses: { 200: decided('REJECTED'), ...notFound, ...conflict('The proposal is no longer PROPOSED (PROPOSAL_STATE_CONFLICT)') },
});

const withdrawRoute = apiRoute({
  method: 'post',
  path: '/policy/proposals/{id}/withdraw',
  operationId: 'withdrawPolicyProposal',
  tags,
  summary: 'Withdraw an open policy proposal (its proposer only)',
  permission: 'policy.write',
  request: { params: PolicyProposalIdParams, body: jsonBody(EmptyBody, false) },
  responses: {
    200: decided('WITHDRAWN'),
    ...forbidden('The role lacks policy.write (FORBIDDEN), or this principal did not propose it (NOT_PROPOSER)'),
    ...notFound,
    ...conflict('The proposal is no longer open (PROPOSAL_STATE_CONFLICT)'),
  },
});

const finalizeRoute = apiRoute({
  method: 'post',
  path: '/policy/proposals/{id}/finalize',
  operationId: 'finalizePolicyProposal',
  tags,
  summary: 'Make an approved policy proposal live once its cool-down has passed (Ferry also does so before it next checks a movement)',
  permission: 'policy.write',
  request: { params: PolicyProposalIdParams, body: jsonBody(EmptyBody, false) },
  responses: {
    200: decided('FINALIZED'),
    ...notFound,
    ...conflict('The cool-down is still running (CHALLENGE_WINDOW_OPEN) or the proposal is not APPROVED (PROPOSAL_STATE_CONFLICT)'),
  },
});

const testRoute = apiRoute({
  method: 'post',
  path: '/policy/test',
  operationId: 'testPolicy',
  tags,
  summary: 'What the live rule set, and the open (or a given) rule set proposal, would do with a movement; nothing is created',
  permission: 'read',
  request: { body: jsonBody(PolicyTestBody) },
  responses: { 200: jsonResponse(PolicyTestSchema, 'The verdicts'), ...notFound },
});

export function policyRoutes(ctx: V3Context) {
  const app = resourceApp();
  const deps = (): PolicyDeps => ({ pool: ctx.pool, config: ctx.config });
  const one = async (p: PolicyProposalRow) => policyProposalView(p, await actorNames(ctx.pool, actorsOf(p)));

  app.openapi(bookRoute, async (c) => {
    await settleDuePolicyProposals({ pool: ctx.pool });
    return c.json({ entries: (await listAddressBook(ctx.pool)).map(entryView) }, 200);
  });

  app.openapi(proposeEntryRoute, async (c) => c.json(await one(await proposeBookEntry(deps(), c.req.valid('json'), actorOf(c))), 202));

  app.openapi(proposeRemovalRoute, async (c) => {
    const { name } = c.req.valid('param');
    return c.json(await one(await proposeBookRemoval(deps(), name, actorOf(c))), 202);
  });

  app.openapi(rulesRoute, async (c) => {
    await settleDuePolicyProposals({ pool: ctx.pool });
    const live = await liveRuleSet(ctx.pool);
    return c.json(
      {
        version: live?.version ?? null,
        rules: (live?.rules ?? []) as unknown as Record<string, unknown>[],
        limits: (live?.limits ?? []) as unknown as Record<string, unknown>[],
        proposal_id: live?.proposal_id ?? null,
        approved_by: live?.approved_by ?? null,
        created_at: isoOrNull(live?.created_at),
      },
      200,
    );
  });

  app.openapi(proposeRulesRoute, async (c) => c.json(await one(await proposeRuleSet(deps(), c.req.valid('json'), actorOf(c))), 202));

  app.openapi(listRoute, async (c) => {
    const q = c.req.valid('query');
    const rows = await listPolicyProposalRows(ctx.pool, { state: q.state, kind: q.kind, limit: q.limit });
    const names = await actorNames(ctx.pool, rows.flatMap(actorsOf));
    return c.json({ proposals: rows.map((p) => policyProposalView(p, names)) }, 200);
  });

  app.openapi(showRoute, async (c) => {
    const { id } = c.req.valid('param');
    const d = await policyProposalDetail(ctx.pool, id);
    const names = await actorNames(ctx.pool, [...actorsOf(d.proposal), ...d.history.map((t) => t.actor)]);
    return c.json(
      {
        proposal: policyProposalView(d.proposal, names),
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

  app.openapi(approveRoute, async (c) => c.json(await one(await approvePolicyProposal(deps(), c.req.valid('param').id, actorOf(c))), 200));
  app.openapi(challengeRoute, async (c) =>
    c.json(await one(await challengePolicyProposal(deps(), c.req.valid('param').id, actorOf(c), c.req.valid('json').reason)), 200),
  );
  app.openapi(rejectRoute, async (c) =>
    c.json(await one(await rejectPolicyProposal(deps(), c.req.valid('param').id, actorOf(c), c.req.valid('json').reason)), 200),
  );
  app.openapi(withdrawRoute, async (c) => c.json(await one(await withdrawPolicyProposal(deps(), c.req.valid('param').id, actorOf(c))), 200));
  app.openapi(finalizeRoute, async (c) => c.json(await one(await finalizePolicyProposal(deps(), c.req.valid('param').id)), 200));

  app.openapi(testRoute, async (c) => {
    const body = c.req.valid('json');
    const version = await getTemplateVersion(ctx.pool, body.template_key, body.template_version);
    if (!version) throw new NotFoundError('template', body.template_key);
    let requester = actorOf(c);
    if (body.requester) {
      const p = await findPrincipal(ctx.pool, body.requester);
      if (!p) throw new ValidationError(`no principal is named ${body.requester}`, { field: 'requester' });
      requester = principalActor(p.id);
    }
    const result = await testPolicy(
      { pool: ctx.pool },
      { templateKey: body.template_key, intent: body.intent, nodes: version.nodes, createdBy: requester },
      ctx.config.approvalQuorum,
      body.rule_set,
      priceSourceOf(ctx.config.file),
    );
    return c.json({ ...result, facts: result.facts as unknown as Record<string, unknown> }, 200);
  });

  return app;
}
