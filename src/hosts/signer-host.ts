import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { errorStatus } from '../errors.ts';
import type { HostRequestVerifier } from '../executors/host-requests.ts';
import { SignRequestSchema, type Signer } from '../executors/protocol.ts';
import { EVM_NONCE_FILL_ACTION } from '../executors/signers/evm-policy.ts';
import type { Logger } from '../log.ts';
import { bearerAuth, callLog, errorAnswer, parseBody, signedRequests } from './common.ts';

/**
 * `ferry signer-host`: one signer (a local key, a KMS key) served over seed 003's remote signer
 * protocol, POST /sign with a SignRequest -> SignResult and GET /health, so the key lives in a
 * process (or machine) of its own. Ferry binds it through `remote.signers` (RemoteSignerProxy).
 *
 * A bearer token is not enough: every /sign must be signed by Ferry's host request key, which the
 * host pins (src/executors/host-requests.ts), for this signer, inside the replay window, with a
 * nonce not seen before. The signed body carries the approval's evidence: the movement, the node,
 * the attempt, the approved plan's hash and the expected effect Ferry pinned for the node; a
 * request without the attempt and the plan hash is refused (HOST_REQUEST_EVIDENCE_MISSING). The
 * signer then applies its own policy (chains, executor allowlist, its own fee caps, the expected
 * effect decoded against the transaction's bytes) to that signed evidence, whatever the caller
 * checked. Neither the token nor a payload or a signature is logged.
 */

export interface SignerHostOptions {
  signer: Signer;
  token: string;
  /** Verifies Ferry's request signatures (FERRY_HOST_REQUEST_PUBLIC_KEYS, FERRY_HOST_REQUEST_MAX_AGE_SECONDS). */
  verifier: HostRequestVerifier;
  log: Logger;
  maxBodyBytes?: number;
}

export function signerHostApp(opts: SignerHostOptions): Hono {
  const { signer, log } = opts;
  const app = new Hono();
  app.use('*', bearerAuth(opts.token));
  app.use('*', bodyLimit({ maxSize: opts.maxBodyBytes ?? 1024 * 1024, onError: (c) => c.json({ code: 'HOST_BODY_TOO_LARGE', message: 'the body is too large' }, 413) }));
  app.use('*', signedRequests(opts.verifier, new Set([signer.signerKey]), log));

  app.post('/sign', async (c) => {
    const started = Date.now();
    const body = await parseBody(c, SignRequestSchema);
    if (!body.ok) return body.response;
    const req = body.value;
    const fields = { method: 'sign', signer_key: signer.signerKey, executor_key: req.executor_key ?? null, request_node_id: req.request_node_id, attempt_no: req.attempt_no ?? null, payload_format: req.payload_format };
    // The nonce reaper's gap filler comes from no approval (its own narrow rule applies); anything
    // else names the approved attempt it is for.
    if (req.signing_intent.action !== EVM_NONCE_FILL_ACTION && (req.attempt_no === undefined || req.compiled_plan_hash === undefined)) {
      callLog(log, fields, errorStatus.HOST_REQUEST_EVIDENCE_MISSING, started);
      return c.json({ code: 'HOST_REQUEST_EVIDENCE_MISSING', message: 'a sign request names the attempt and the approved plan hash it is for (attempt_no, compiled_plan_hash)' }, 422);
    }
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
