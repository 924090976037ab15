import { writeAudit } from '../persistence/audit.ts';
import { createDashboardSession, endDashboardSession } from '../persistence/dashboard-sessions.ts';
import { withTransaction, type Pool } from '../persistence/db.ts';
import { principalActor } from '../persistence/principals.ts';
import type { AuthenticatedToken } from '../persistence/tokens.ts';

/**
 * Signing in to and out of the pg-boss dashboard. A session lets its holder retry, cancel and delete
 * jobs, so its start and end are audited like any credential use that grants writes: the session
 * row and its audit row commit together. The audit names the token, never the session id (the
 * cookie's value is a bearer secret).
 */
export async function signInToDashboard(pool: Pool, who: AuthenticatedToken, ttlSeconds: number): Promise<string> {
  return withTransaction(pool, async (client) => {
    const session = await createDashboardSession(client, who.id, ttlSeconds);
    await writeAudit(client, {
      actor: principalActor(who.principalId),
      action: 'dashboard.sign_in',
      entity_type: 'api_token',
      entity_id: who.id,
      details: { token_name: who.name, role: who.role, ttl_seconds: ttlSeconds },
    });
    return session;
  });
}

/** Ends a session; an unknown or already ended one changes nothing and is not audited. */
export async function signOutOfDashboard(pool: Pool, sessionId: string): Promise<void> {
  await withTransaction(pool, async (client) => {
    const ended = await endDashboardSession(client, sessionId);
    if (!ended) return;
    await writeAudit(client, { actor: principalActor(ended.principalId), action: 'dashboard.sign_out', entity_type: 'api_token', entity_id: ended.tokenId });
  });
}
