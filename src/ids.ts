/**
 * The shape of Ferry's ids (movements, nodes, tokens, callbacks: PostgreSQL uuids). One pattern
 * for every place that checks an id before it reaches a uuid cast: the API, the inspection routes,
 * the CLI and the persistence modules.
 */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(id: string): boolean {
  return UUID_PATTERN.test(id);
}

/**
 * The key of one attempt of one node (`<node id>:<attempt>`): the idempotency key Ferry stores on
 * the node row when the attempt starts and hands to the executor, the same in every process and on
 * every retry of a call. Built here only, never in SQL.
 */
export function attemptKey(requestNodeId: string, attemptNo: number): string {
  return `${requestNodeId}:${attemptNo}`;
}
