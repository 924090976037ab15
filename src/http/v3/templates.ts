import type { z } from '@hono/zod-openapi';
import { NotFoundError } from '../../errors.ts';
import { compileOptionsOf } from '../../services/movements.ts';
import { proposeTemplate } from '../../services/template-proposals.ts';
import { getTemplate, getTemplateVersion, listTemplates, listTemplateVersions } from '../../persistence/templates.ts';
import { compilePlan, hashedPlan } from '../../plan/compile.ts';
import { actorNames } from '../actor-names.ts';
import { actorOf, resourceApp, type V3Context } from './context.ts';
import {
  CompileBody,
  CompilePreviewSchema,
  TemplateDefinitionBody,
  TemplateDetailSchema,
  TemplateKeyParams,
  TemplateListSchema,
  TemplateProposedSchema,
  TemplateSaveSchema,
  TemplateVersionParams,
  TemplateVersionSchema,
  conflict,
  jsonBody,
  jsonResponse,
  notFound,
  unprocessable,
} from './schemas.ts';
import { proposalView } from './template-proposals.ts';
import { templateSummaryView, templateVersionSummaryView, templateVersionView } from '../views.ts';
import { apiRoute, readRoute } from './route.ts';

const tags = ['Templates'];

const saveRoute = apiRoute({
  operationId: 'saveTemplate',
  method: 'post',
  path: '/templates',
  tags,
  summary: 'Post a plan template: a changed graph becomes a proposal (202), an existing graph changes nothing (200)',
  permission: 'template.write',
  request: { body: jsonBody(TemplateDefinitionBody) },
  responses: {
    202: jsonResponse(TemplateProposedSchema, 'The graph is new: a proposal waits for approval and its challenge window (see /v3/template-proposals)'),
    200: jsonResponse(TemplateSaveSchema, 'The graph matched an existing version, which is returned'),
    ...conflict('The template already has an open proposal of another graph (PROPOSAL_ALREADY_OPEN)'),
    ...unprocessable('The template breaks a plan rule or binds an unregistered executor or signer (INVALID_TEMPLATE; details.rule names the rule, details.node_keys the nodes)'),
  },
});

const listRoute = readRoute({
  operationId: 'listTemplates',
  path: '/templates',
  tags,
  summary: 'List templates',
  answer: TemplateListSchema,
  shows: 'Every template with at least one version',
});

const getRoute = readRoute({
  operationId: 'getTemplate',
  path: '/templates/{key}',
  tags,
  summary: 'A template and its versions',
  request: { params: TemplateKeyParams },
  answer: TemplateDetailSchema,
  shows: 'The template, versions newest first',
  errors: notFound,
});

const versionRoute = readRoute({
  operationId: 'getTemplateVersion',
  path: '/templates/{key}/versions/{version}',
  tags,
  summary: 'One version of a template, with its nodes and edges',
  request: { params: TemplateVersionParams },
  answer: TemplateVersionSchema,
  shows: 'The version',
  errors: notFound,
});

const compileRoute = apiRoute({
  operationId: 'compileTemplate',
  method: 'post',
  path: '/templates/{key}/compile',
  tags,
  summary: 'Preview the compiled plan and its hash for an intent, without creating anything',
  permission: 'read',
  request: { params: TemplateKeyParams, body: jsonBody(CompileBody) },
  responses: {
    200: jsonResponse(CompilePreviewSchema, 'The plan a movement with this intent would run'),
    ...notFound,
    ...unprocessable(
      'The stored template no longer validates, or binds an executor that is no longer registered (INVALID_TEMPLATE); ' +
        'the intent does not match the template\'s intent schema or a node\'s token (INTENT_INVALID; details.field and details.rule say which), ' +
        'or a number in it cannot be kept exactly (INEXACT_NUMBER)',
    ),
  },
});

export function templateRoutes(ctx: V3Context) {
  const app = resourceApp();

  app.openapi(saveRoute, async (c) => {
    const def = c.req.valid('json');
    const actor = actorOf(c);
    const result = await proposeTemplate({ pool: ctx.pool, config: ctx.config }, def, actor, ctx.bindings());
    if (result.outcome !== 'unchanged') {
      const names = await actorNames(ctx.pool, [result.proposal.proposed_by]);
      return c.json({ proposal: proposalView(result.proposal, names), created: result.outcome === 'proposed' }, 202);
    }
    const body = {
      template: templateSummaryView(result.template),
      version: templateVersionView(result.version, await actorNames(ctx.pool, [result.version.created_by])),
      created: false,
      timeout_policy_not_applied: result.timeout_policy_not_applied,
    };
    return c.json(body, 200);
  });

  app.openapi(listRoute, async (c) => {
    const templates = await listTemplates(ctx.pool);
    return c.json({ templates: templates.map(templateSummaryView) }, 200);
  });

  app.openapi(getRoute, async (c) => {
    const { key } = c.req.valid('param');
    const template = await getTemplate(ctx.pool, key);
    if (!template || template.latest_version === 0) throw new NotFoundError('template', key);
    const versions = await listTemplateVersions(ctx.pool, key);
    const names = await actorNames(ctx.pool, versions.map((v) => v.created_by));
    return c.json({ template: templateSummaryView(template), versions: versions.map((v) => templateVersionSummaryView(v, names)) }, 200);
  });

  app.openapi(versionRoute, async (c) => {
    const { key, version } = c.req.valid('param');
    const found = await getTemplateVersion(ctx.pool, key, version);
    if (!found) throw new NotFoundError('template version', `${key}@${version}`);
    return c.json(templateVersionView(found, await actorNames(ctx.pool, [found.created_by])), 200);
  });

  app.openapi(compileRoute, async (c) => {
    const { key } = c.req.valid('param');
    const body = c.req.valid('json');
    const version = await getTemplateVersion(ctx.pool, key, body.template_version);
    if (!version) {
      throw new NotFoundError('template', body.template_version === undefined ? key : `${key}@${body.template_version}`);
    }
    const plan = compilePlan(version, body.intent, body.input_params ?? {}, ctx.bindingsIfRunning(), compileOptionsOf(ctx.config));
    return c.json(
      {
        compiled_plan_hash: plan.compiled_plan_hash,
        compiled_plan: plan as unknown as Record<string, unknown>,
        hashed_plan: hashedPlan(plan, body.intent, body.input_params ?? {}) as unknown as z.infer<typeof CompilePreviewSchema>['hashed_plan'],
      },
      200,
    );
  });

  return app;
}
