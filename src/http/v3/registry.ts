import { listExecutors, listSigners } from '../../persistence/registry.ts';
import { setSignerExpectedIdentity } from '../../services/signer-identity.ts';
import { actorNames } from '../actor-names.ts';
import { actorOf, resourceApp, type V3Context } from './context.ts';
import {
  ExecutorListSchema,
  ExpectedIdentityBody,
  SignerKeyParams,
  SignerListSchema,
  SignerResultSchema,
  jsonBody,
  jsonResponse,
  notFound,
} from './schemas.ts';
import { executorView, signerView } from '../views.ts';
import { apiRoute, readRoute } from './route.ts';

const tags = ['Registry'];

const executorsRoute = readRoute({
  operationId: 'listExecutors',
  path: '/executors',
  tags,
  summary: 'The executor roster with each executor\'s last health check',
  answer: ExecutorListSchema,
  shows: 'Every executor the health sweep has seen',
});

const signersRoute = readRoute({
  operationId: 'listSigners',
  path: '/signers',
  tags,
  summary: 'The signer roster: expected vs observed identity and the resulting posture',
  answer: SignerListSchema,
  shows: 'Every signer the health sweep has seen',
});

const expectedIdentityRoute = apiRoute({
  operationId: 'setSignerExpectedIdentity',
  method: 'put',
  path: '/signers/{signer_key}/expected-identity',
  tags,
  summary: 'Enrol the address a signer is expected to sign as (the only writer of it)',
  permission: 'signer.identity',
  request: { params: SignerKeyParams, body: jsonBody(ExpectedIdentityBody) },
  responses: { 200: jsonResponse(SignerResultSchema, 'The signer with its new posture'), ...notFound },
});

export function registryRoutes(ctx: V3Context) {
  const app = resourceApp();

  app.openapi(executorsRoute, async (c) => c.json({ executors: (await listExecutors(ctx.pool)).map(executorView) }, 200));

  app.openapi(signersRoute, async (c) => {
    const signers = await listSigners(ctx.pool);
    const names = await actorNames(ctx.pool, signers.map((s) => s.expected_set_by));
    return c.json({ signers: signers.map((s) => signerView(s, names)) }, 200);
  });

  app.openapi(expectedIdentityRoute, async (c) => {
    const { signer_key } = c.req.valid('param');
    const { address } = c.req.valid('json');
    const signer = await setSignerExpectedIdentity(ctx.pool, signer_key, address, actorOf(c));
    return c.json({ signer: signerView(signer, await actorNames(ctx.pool, [signer.expected_set_by])) }, 200);
  });

  return app;
}
