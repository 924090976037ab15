import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { ZodError } from 'zod';
import type { MovementRequestMessage } from '../queue/movement-queue.ts';
import type { QueueCredentialInfo } from '../services/queue-credentials.ts';
import { CliError, NAME_OR_ID, nameOrId, UsageError, type CliCommand, type CliContext } from './command.ts';
import { refuseInexactNumbers } from './json-number.ts';
import { printedJson, printList } from './format.ts';
import { operatorName } from './operator.ts';

/**
 * `ferry queue send` signs a movement order with a queue credential's key and places it on the
 * movement queue, as another system would; `ferry queue credentials create | list | revoke` manages
 * those keys (database access: the root of trust, audited as `cli:<user>`). The key is read from
 * --key-file or FERRY_QUEUE_KEY, never from the command line (a process list shows arguments).
 */

// The queue consumer and the credential service (pg-boss, the services, the plan compiler) load in
// the commands that use them, never for `ferry --help` or another command.
const queueModule = () => import('../queue/movement-queue.ts');
const credentials = () => import('../services/queue-credentials.ts');

async function queueKey(ctx: CliContext): Promise<string> {
  const file = ctx.option('key-file');
  if (file !== undefined) {
    try {
      return (await readFile(file, 'utf8')).trim();
    } catch (err) {
      throw new CliError(`cannot read --key-file ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
    }
  }
  const env = ctx.env.FERRY_QUEUE_KEY;
  if (env) return env.trim();
  throw new UsageError('a queue key is required: --key-file FILE or FERRY_QUEUE_KEY (create one with `ferry queue credentials create --principal NAME`)');
}

function jsonObject(name: string, text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UsageError(`--${name} must be JSON`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new UsageError(`--${name} must be a JSON object`);
  refuseInexactNumbers(name, text);
  return value as Record<string, unknown>;
}

const send: CliCommand = {
  path: ['queue', 'send'],
  summary: 'sign a movement order with a queue key and place it on the movement queue, as another system would',
  usage: '--template KEY --intent JSON --requested-by PRINCIPAL (--key-file FILE | FERRY_QUEUE_KEY) [--version N] [--params JSON] [--callback-url URL] [--idempotency-key KEY] [--json]',
  options: {
    template: { type: 'string' },
    version: { type: 'string' },
    intent: { type: 'string' },
    params: { type: 'string' },
    'callback-url': { type: 'string' },
    'requested-by': { type: 'string' },
    'idempotency-key': { type: 'string' },
    'key-file': { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(ctx) {
    const key = await queueKey(ctx);
    const version = ctx.option('version');
    if (version !== undefined && !/^[0-9]{1,10}$/.test(version)) throw new UsageError('--version must be a positive integer');
    const draft = {
      template_key: ctx.option('template'),
      ...(version !== undefined ? { template_version: Number(version) } : {}),
      intent: jsonObject('intent', ctx.option('intent')),
      ...(ctx.option('params') !== undefined ? { input_params: jsonObject('params', ctx.option('params')) } : {}),
      ...(ctx.option('callback-url') !== undefined ? { callback_url: ctx.option('callback-url') } : {}),
      idempotency_key: ctx.option('idempotency-key') ?? randomUUID(),
      requested_by: ctx.option('requested-by'),
    };
    let message: MovementRequestMessage;
    try {
      const [{ MovementRequestMessage }, { signMovementOrder }] = await Promise.all([queueModule(), credentials()]);
      message = MovementRequestMessage.parse(signMovementOrder(draft, key));
    } catch (err) {
      if (!(err instanceof ZodError)) throw new UsageError((err as Error).message);
      const issue = err.issues[0]!;
      const flag = { template_key: 'template', requested_by: 'requested-by', intent: 'intent' }[String(issue.path[0])] ?? String(issue.path[0]);
      throw new UsageError(`--${flag}: ${issue.message}`);
    }
    const [{ sendMovementRequest }, { withBoss }] = await Promise.all([queueModule(), import('./database.ts')]);
    const jobId = await withBoss(ctx, (_db, boss) => sendMovementRequest(boss, message));
    if (printedJson(ctx, { job_id: jobId, idempotency_key: message.idempotency_key })) return;
    ctx.out(`Queued as job ${jobId} (idempotency key ${message.idempotency_key}); a worker creates the movement.`);
  },
};

const createCredential: CliCommand = {
  path: ['queue', 'credentials', 'create'],
  summary: "create a principal's queue credential: the key that signs its queued movement orders, shown once (audited)",
  usage: '--principal PRINCIPAL [--name NAME] [--out FILE] [--by OPERATOR] [--json]',
  options: { principal: { type: 'string' }, name: { type: 'string' }, out: { type: 'string' }, by: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    const principal = ctx.option('principal');
    if (!principal) throw new UsageError('--principal is required');
    const out = ctx.option('out');
    const { createQueueCredential } = await credentials();
    const created = await ctx.withDatabase(({ pool }) => createQueueCredential(pool, { principal, name: ctx.option('name') }, operatorName(ctx)));
    const { key, ...info } = created;
    if (out !== undefined) {
      // 'wx': never over an existing file; 0600: the key is a secret.
      await writeFile(out, `${key}\n`, { flag: 'wx', mode: 0o600 }).catch((err: NodeJS.ErrnoException) => {
        throw new CliError(`cannot write --out ${out} (${err.code ?? 'error'}); the credential ${info.id} exists without a kept key: revoke it`);
      });
    }
    if (printedJson(ctx, out !== undefined ? info : created)) return;
    ctx.out(`Created queue credential "${info.name}" of principal "${info.principal_name}" (id ${info.id}).`);
    if (out !== undefined) {
      ctx.out(`Its key is in ${out} (mode 0600); Ferry keeps only the public half.`);
      return;
    }
    ctx.out('');
    ctx.out(`  ${key}`);
    ctx.out('');
    ctx.out('Store it now: Ferry keeps only the public half and cannot show it again.');
  },
};

const listCredentials: CliCommand = {
  path: ['queue', 'credentials', 'list'],
  summary: 'list queue credentials and their principals (never a key)',
  usage: '[--all] [--json]',
  options: { all: { type: 'boolean' }, json: { type: 'boolean' } },
  async run(ctx) {
    const { queueCredentials } = await credentials();
    const rows = await ctx.withDatabase(({ pool }) => queueCredentials(pool, { includeRevoked: ctx.flag('all') }));
    printList(ctx, rows, {
      empty: 'No queue credentials. Create one with: ferry queue credentials create --principal PRINCIPAL',
      columns: ['ID', 'NAME', 'PRINCIPAL', 'CREATED', 'STATUS'],
      row: (q: QueueCredentialInfo) => [q.id, q.name, q.principal_name, q.created_at.toISOString(), q.revoked_at ? `revoked ${q.revoked_at.toISOString()}` : 'active'],
    });
  },
};

const revokeCredential: CliCommand = {
  path: ['queue', 'credentials', 'revoke'],
  summary: 'revoke a queue credential: orders it signs are dead-lettered from now on (audited)',
  usage: `${NAME_OR_ID.usage} [--by OPERATOR] [--json]`,
  options: { ...NAME_OR_ID.options, by: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    const ref = nameOrId(ctx, 'a queue credential id');
    const { revokeQueueCredential } = await credentials();
    const revoked = await ctx.withDatabase(({ pool }) => revokeQueueCredential(pool, ref, operatorName(ctx)));
    if (!printedJson(ctx, revoked)) ctx.out(`Revoked queue credential "${revoked.name}" of principal "${revoked.principal_name}".`);
  },
};

export const queueCommands: CliCommand[] = [send, createCredential, listCredentials, revokeCredential];
