import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { z } from 'zod';
import { bindingKey } from '../executors/registry.ts';
import {
  ExecutionContextSchema,
  PreparedActionSchema,
  SignResultSchema,
  type ExecutionContext,
  type ExecutionResult,
  type Executor,
} from '../executors/protocol.ts';
import type { HostRequestVerifier } from '../executors/host-requests.ts';
import type { Logger } from '../log.ts';
import { bearerAuth, callLog, errorAnswer, parseBody, signedAudience, signedRequests } from './common.ts';

/**
 * `ferry executor-host`: chosen local executors served over seed 003's remote executor protocol,
 * so the process that holds an exchange's credentials or a chain lane's settings need not be the
 * one running Ferry's workers. Ferry binds them through `remote.executors` (RemoteExecutorProxy).
 *
 * POST /preflight (204 when it passes), /prepare, /observe, /recover, /inspect, /cancel with an
 * ExecutionContext; POST /submit with {context, prepared_action, sign_result?}; GET /health.
 * One host may serve several executors: each call is routed by the context's
 * resolved_bindings.executor.executor_key. Every route needs the bearer token; every POST besides
 * must be signed by Ferry's host request key, which the host pins (src/executors/host-requests.ts),
 * for the executor the context names, inside the replay window, with a nonce not seen before: the
 * context (movement, node, attempt, approved plan hash, the expected effect Ferry pinned) and, for
 * submit, the prepared action and its signature are then exactly what Ferry sent.
 *
 * submit runs the executor's pre-submit check first (the last gate before a side effect, as the
 * local dispatcher would): a temporary refusal answers 503, which the proxy reports as UNKNOWN for
 * recovery to resolve; it never makes Ferry submit twice.
 */

export interface ExecutorHostOptions {
  executors: Executor[];
  token: string;
  /** Verifies Ferry's request signatures (FERRY_HOST_REQUEST_PUBLIC_KEYS, FERRY_HOST_REQUEST_MAX_AGE_SECONDS). */
  verifier: HostRequestVerifier;
  log: Logger;
  /** Largest request body, in bytes (default 1 MiB). */
  maxBodyBytes?: number;
}

const SubmitBodySchema = z.object({ context: ExecutionContextSchema, prepared_action: PreparedActionSchema, sign_result: SignResultSchema.optional() });

type ContextMethod = 'prepare' | 'observe' | 'recover' | 'inspect' | 'cancel';

export function executorHostApp(opts: ExecutorHostOptions): Hono {
  const served = new Map(opts.executors.map((e) => [e.executorKey, e] as const));
  const log = opts.log;
  const app = new Hono();
  app.use('*', bearerAuth(opts.token));
  app.use('*', bodyLimit({ maxSize: opts.maxBodyBytes ?? 1024 * 1024, onError: (c) => c.json({ code: 'HOST_BODY_TOO_LARGE', message: 'the body is too large' }, 413) }));
  app.use('*', signedRequests(opts.verifier, null, log));

  const pick = (ctx: ExecutionContext): Executor | null => served.get(bindingKey(ctx.resolved_bindings.executor, 'executor_key') ?? '') ?? null;
  const notServed = (ctx: ExecutionContext) => ({ code: 'EXECUTOR_NOT_SERVED', message: `this host does not serve ${JSON.stringify(bindingKey(ctx.resolved_bindings.executor, 'executor_key'))}` });
  const fields = (method: string, ctx: ExecutionContext) => ({ method, executor_key: bindingKey(ctx.resolved_bindings.executor, 'executor_key'), request_node_id: ctx.request_node_id, attempt_no: ctx.attempt_no });

  async function answer(c: Context, method: string, ctx: ExecutionContext, run: (e: Executor) => Promise<ExecutionResult | null>) {
    const started = Date.now();
    // Signed for one executor, naming another: a request meant for one lane is never run by another.
    const audience = signedAudience(c);
    const named = bindingKey(ctx.resolved_bindings.executor, 'executor_key');
    if (audience !== named) {
      callLog(log, fields(method, ctx), 401, started);
      return c.json({ code: 'HOST_REQUEST_SIGNATURE_INVALID', message: `the request is signed for ${JSON.stringify(audience)} and names executor ${JSON.stringify(named)}` }, 401);
    }
    const executor = pick(ctx);
    if (!executor) {
      callLog(log, fields(method, ctx), 404, started);
      return c.json(notServed(ctx), 404);
    }
    try {
      const result = await run(executor);
      callLog(log, { ...fields(method, ctx), next_state: result?.next_state ?? null }, result ? 200 : 204, started);
      return result ? c.json(result, 200) : c.body(null, 204);
    } catch (err) {
      const res = errorAnswer(c, err);
      callLog(log, fields(method, ctx), res.status, started, err);
      return res;
    }
  }

  app.post('/preflight', async (c) => {
    const body = await parseBody(c, ExecutionContextSchema);
    if (!body.ok) return body.response;
    return answer(c, 'preflight', body.value, (e) => e.preflight(body.value));
  });
  for (const method of ['prepare', 'observe', 'recover', 'inspect', 'cancel'] as ContextMethod[]) {
    app.post(`/${method}`, async (c) => {
      const body = await parseBody(c, ExecutionContextSchema);
      if (!body.ok) return body.response;
      const ctx = body.value;
      if (method === 'cancel' && pick(ctx) && !pick(ctx)!.cancel) {
        return c.json({ code: 'CANCEL_NOT_SUPPORTED', message: `${String(bindingKey(ctx.resolved_bindings.executor, 'executor_key'))} does not offer cancel` }, 422);
      }
      return answer(c, method, ctx, (e) => (method === 'cancel' ? e.cancel!(ctx) : e[method](ctx)));
    });
  }
  app.post('/submit', async (c) => {
    const body = await parseBody(c, SubmitBodySchema);
    if (!body.ok) return body.response;
    const { context, prepared_action, sign_result } = body.value;
    return answer(c, 'submit', context, async (e) => {
      await e.preSubmitCheck?.(context, prepared_action);
      return e.submit(context, prepared_action, sign_result ? { signResult: sign_result } : {});
    });
  });
  app.get('/health', async (c) => {
    const rows = await Promise.all(
      [...served.values()].map(async (e) => {
        try {
          const h = e.health ? await e.health() : null;
          return [e.executorKey, h ?? { ok: true, executor_key: e.executorKey }] as const;
        } catch (err) {
          return [e.executorKey, { ok: false, executor_key: e.executorKey, error: (err as Error).message }] as const;
        }
      }),
    );
    const ok = rows.every(([, h]) => (h as Record<string, unknown>).ok !== false);
    return c.json({ ok, mode: 'remote_host', executors: Object.fromEntries(rows) }, 200);
  });
  app.notFound((c) => c.json({ code: 'HOST_NOT_FOUND', message: 'no such endpoint' }, 404));
  return app;
}
