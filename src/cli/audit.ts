import { auditChainHead, promoteAuditBatch, verifyAuditChain, type ChainHead } from '../persistence/audit.ts';
import type { Pool } from '../persistence/db.ts';
import { UsageError, type CliCommand } from './command.ts';

const BATCH = 500;

/** Moves every pending outbox row onto the chain; returns how many. */
async function drainOutbox(pool: Pool): Promise<number> {
  let total = 0;
  for (;;) {
    const moved = await promoteAuditBatch(pool, BATCH);
    total += moved;
    if (moved < BATCH) return total;
  }
}

const verify: CliCommand = {
  path: ['audit', 'verify'],
  summary: 'promote pending audit rows, then re-check the whole hash chain',
  usage: '[--checkpoint ID:HASH] [--json]',
  options: { checkpoint: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    const raw = ctx.option('checkpoint');
    let checkpoint: ChainHead | undefined;
    if (raw !== undefined) {
      const m = /^([1-9][0-9]{0,15}):(sha256:[0-9a-f]{64})$/.exec(raw);
      if (!m) throw new UsageError('--checkpoint must be ID:HASH as printed by `ferry audit head`');
      checkpoint = { id: Number(m[1]), hash: m[2] };
    }
    const { promoted, result } = await ctx.withDatabase(async ({ pool }) => {
      // Verify what the API has acknowledged, not only what the promoter happened to move already.
      const promoted = await drainOutbox(pool);
      return { promoted, result: await verifyAuditChain(pool, { checkpoint }) };
    });
    if (ctx.flag('json')) ctx.out(JSON.stringify({ ...result, promoted }));
    else if (result.ok) ctx.out(`audit chain ok (${result.checked} events)`);
    else ctx.out(`audit chain BROKEN at event ${result.broken!.id}: ${result.broken!.reason} (${result.checked} events verified before it)`);
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
      return auditChainHead(pool);
    });
    if (ctx.flag('json')) ctx.out(JSON.stringify(found));
    else ctx.out(found ? `${found.id}:${found.hash}` : 'the audit chain is empty');
  },
};

export const auditCommands: CliCommand[] = [verify, head];
