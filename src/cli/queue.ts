import { randomUUID } from 'node:crypto';
import { ZodError } from 'zod';
import { MovementRequestMessage, sendMovementRequest } from '../actors/movement-queue.ts';
import { UsageError, type CliCommand } from './command.ts';
import { refuseInexactNumbers } from './json-number.ts';
import { printedJson } from './format.ts';
import { withBoss } from './database.ts';

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
  summary: 'place a movement request on the movement queue, as another system would',
  usage: '--template KEY --intent JSON --requested-by TOKEN_NAME [--version N] [--params JSON] [--callback-url URL] [--idempotency-key KEY] [--json]',
  options: {
    template: { type: 'string' },
    version: { type: 'string' },
    intent: { type: 'string' },
    params: { type: 'string' },
    'callback-url': { type: 'string' },
    'requested-by': { type: 'string' },
    'idempotency-key': { type: 'string' },
    json: { type: 'boolean' },
  },
  async run(ctx) {
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
      message = MovementRequestMessage.parse(draft);
    } catch (err) {
      const issue = (err as ZodError).issues[0]!;
      const flag = { template_key: 'template', requested_by: 'requested-by', intent: 'intent' }[String(issue.path[0])] ?? String(issue.path[0]);
      throw new UsageError(`--${flag}: ${issue.message}`);
    }
    const jobId = await withBoss(ctx, (_db, boss) => sendMovementRequest(boss, message));
    if (printedJson(ctx, { job_id: jobId, idempotency_key: message.idempotency_key })) return;
    ctx.out(`Queued as job ${jobId} (idempotency key ${message.idempotency_key}); a worker creates the movement.`);
  },
};

export const queueCommands: CliCommand[] = [send];
