import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { SignRequestSchema, type Signer } from '../executors/protocol.ts';
import type { Logger } from '../log.ts';
import { bearerAuth, callLog, errorAnswer, parseBody } from './common.ts';

/**
 * `ferry signer-host`: one signer (a local key, a KMS key) served over seed 003's remote signer
 * protocol, POST /sign with a SignRequest -> SignResult and GET /health, so the key lives in a
 * process (or machine) of its own. Ferry binds it through `remote.signers` (RemoteSignerProxy).
 * The signer applies its own policy (chains, executor allowlist, the expected effect) to every
 * request, whatever the caller checked. Every route needs the bearer token; neither the token nor
 * a payload or a signature is logged.
 */

export interface SignerHostOptions {
  signer: Signer;
  token: string;
  log: Logger;
  maxBodyBytes?: number;
}

export function signerHostApp(opts: SignerHostOptions): Hono {
  const { signer, log } = opts;
  const app = new Hono();
  app.use('*', bearerAuth(opts.token));
  app.use('*', bodyLimit({ maxSize: opts.maxBodyBytes ?? 1024 * 1024, onError: (c) => c.json({ code: 'HOST_BODY_TOO_LARGE', message: 'the body is too large' }, 413) }));

  app.post('/sign', async (c) => {
    const started = Date.now();
    const body = await parseBody(c, SignRequestSchema);
    if (!body.ok) return body.response;
    const req = body.value;
    const fields = { method: 'sign', signer_key: signer.signerKey, executor_key: req.executor_key ?? null, request_node_id: req.request_node_id, payload_format: req.payload_format };
    try {
      const result = await signer.sign(req);
      callLog(log, fields, 200, started);
      return c.json(result, 200);
    } catch (err) {
      const res = errorAnswer(c, err);
      callLog(log, fields, res.status, started, err);
      return res;
    }
  });
  app.get('/health', async (c) => {
    try {
      const h = signer.health ? await signer.health() : null;
      const address = (signer as { address?: unknown }).address;
      return c.json({ ok: true, signer_key: signer.signerKey, mode: 'remote_host', ...(typeof address === 'string' ? { address } : {}), ...(h ?? {}) }, 200);
    } catch (err) {
      return errorAnswer(c, err);
    }
  });
  app.notFound((c) => c.json({ code: 'HOST_NOT_FOUND', message: 'no such endpoint' }, 404));
  return app;
}
