import type { ExecutionContext, PreparedAction } from './protocol.ts';

/**
 * A watch: what an observation executor prepares (the deposit, message or packet to look for),
 * carried as the JSON payload of its prepared action and read back from the attempt's artifacts on
 * every observe and recover. The lanes differ only in the fields a watch must have.
 */

/** The watch in a prepared action's payload when it parses and `isWatch` accepts it; else null. */
export function parseWatch<W>(payload: string | null, isWatch: (w: Record<string, unknown>) => boolean): W | null {
  if (!payload) return null;
  try {
    const w = JSON.parse(payload) as unknown;
    return w !== null && typeof w === 'object' && isWatch(w as Record<string, unknown>) ? (w as W) : null;
  } catch {
    return null;
  }
}

/** The watch this attempt prepared (its newest prepared action), or null when it prepared none. */
export function pinnedWatch<W>(ctx: ExecutionContext, parse: (payload: string | null) => W | null): W | null {
  const prepared = [...(ctx.attempt_artifacts ?? [])].reverse().find((a) => a.artifact_type === 'prepared_action' && a.content_inline);
  if (!prepared?.content_inline) return null;
  try {
    return parse((JSON.parse(prepared.content_inline) as PreparedAction).payload);
  } catch {
    return null;
  }
}
