import { readFileSync, writeFileSync } from 'node:fs';
import { readCheckpoint, signCheckpoint } from '../audit-checkpoint.ts';
import { loadConfig } from '../config.ts';
import type { ChainHead } from '../persistence/audit.ts';
import type { Pool } from '../persistence/db.ts';
import { CliError, UsageError, type CliCommand, type CliContext } from './command.ts';
import { printedJson } from './format.ts';

const BATCH = 500;

/** The audit chain's SQL (and the pool behind it), loaded by these commands only. */
const chain = () => import('../persistence/audit.ts');

/** Moves every pending outbox row onto the chain; returns how many. */
async function drainOutbox(pool: Pool): Promise<number> {
  let total = 0;
  const { promoteAuditBatch } = await chain();
  for (;;) {
    const moved = await promoteAuditBatch(pool, BATCH);
    total += moved;
    if (moved < BATCH) return total;
  }
}

const verify: CliCommand = {
  path: ['audit', 'verify'],
  summary: 'promote pending audit rows, then re-check the whole hash chain',
  usage: '[--checkpoint ID:HASH|FILE] [--json]',
  options: { checkpoint: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    const raw = ctx.option('checkpoint');
    let checkpoint: ChainHead | undefined;
    if (raw !== undefined) {
      const m = /^([1-9][0-9]{0,15}):(sha256:[0-9a-f]{64})$/.exec(raw);
      // Anything else is a file written by `ferry audit checkpoint export`, signature checked first.
      checkpoint = m ? { id: Number(m[1]), hash: m[2] } : signedCheckpoint(ctx, raw);
    }
    const { promoted, result } = await ctx.withDatabase(async ({ pool }) => {
      // Verify what the API has acknowledged, not only what the promoter happened to move already.
      const promoted = await drainOutbox(pool);
      return { promoted, result: await (await chain()).verifyAuditChain(pool, { checkpoint }) };
    });
    if (!printedJson(ctx, { ...result, promoted })) {
      ctx.out(result.ok ? `audit chain ok (${result.checked} events)` : `audit chain BROKEN at event ${result.broken!.id}: ${result.broken!.reason} (${result.checked} events verified before it)`);
    }
    return result.ok ? 0 : 1;
  },
};

const head: CliCommand = {
  path: ['audit', 'head'],
  summary: 'print the last event of the chain as ID:HASH (keep it outside the database)',
  usage: '[--json]',
  options: { json: { type: 'boolean' } },
  async run(ctx) {
    const found = await ctx.withDatabase(async ({ pool }) => {
      await drainOutbox(pool);
      return (await chain()).auditChainHead(pool);
    });
    if (!printedJson(ctx, found)) ctx.out(found ? `${found.id}:${found.hash}` : 'the audit chain is empty');
  },
};

/** The key that signs and checks checkpoints; never echoed. */
function checkpointKey(ctx: CliContext): string {
  const key = loadConfig(ctx.env).auditCheckpointKey;
  if (!key) throw new CliError('set FERRY_AUDIT_CHECKPOINT_KEY (32 characters or more) to sign and check audit checkpoints');
  return key;
}

function signedCheckpoint(ctx: CliContext, file: string): ChainHead {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    throw new UsageError(`--checkpoint must be ID:HASH or a readable checkpoint file; cannot read ${file}`);
  }
  const read = readCheckpoint(text, checkpointKey(ctx));
  if (!read.ok) throw new CliError(`audit checkpoint REJECTED: ${read.reason}`);
  return { id: read.checkpoint.sequence, hash: read.checkpoint.hash };
}

const checkpointExport: CliCommand = {
  path: ['audit', 'checkpoint', 'export'],
  summary: 'write the signed head of the audit chain to a file (keep it outside the database)',
  usage: '--out FILE [--json]',
  options: { out: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    const out = ctx.option('out');
    if (!out) throw new UsageError('--out FILE is required');
    const key = checkpointKey(ctx);
    const found = await ctx.withDatabase(async ({ pool }) => {
      await drainOutbox(pool);
      return (await chain()).auditChainHead(pool);
    });
    if (!found) throw new CliError('the audit chain is empty: nothing to checkpoint yet');
    const checkpoint = signCheckpoint(found, key, new Date());
    writeFileSync(out, JSON.stringify(checkpoint, null, 2) + '\n', { mode: 0o644 });
    if (!printedJson(ctx, checkpoint)) ctx.out(`checkpoint of event ${checkpoint.sequence} (${checkpoint.hash}) written to ${out}`);
  },
};

export const auditCommands: CliCommand[] = [verify, head, checkpointExport];
