/**
 * Event streams and their tokens, over a real HTTP server: an open stream re-checks its token, so a
 * revoked token's stream ends (within FERRY_STREAM_TOKEN_RECHECK_SECONDS, short here), and one token
 * may hold only FERRY_STREAM_MAX_PER_TOKEN streams at once (the next is 429 TOO_MANY_STREAMS).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/http/app.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { createToken, revokeToken } from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';
import { collectingDeps, seedMovement, threeNodeTemplate } from './helpers/fixtures.ts';
import { serveApp } from './helpers/http.ts';
import { openSse, type SseReader } from './helpers/sse.ts';
import { waitFor } from './helpers/wait.ts';

const db = await testDatabase();
const config = loadConfig({
  FERRY_DATA_DIR: '.ferry/test-events-tokens',
  FERRY_LOG_LEVEL: 'silent',
  FERRY_STREAM_TOKEN_RECHECK_SECONDS: '0.1',
  FERRY_STREAM_MAX_PER_TOKEN: '3',
});
const app = createApp({ pool: db.pool, config });
/** This app's open event streams (each app counts only its own). */
const openEventStreams = () => app.eventStreams.size;
const { url: base } = await serveApp(app);
const { movement } = await seedMovement(db.pool, threeNodeTemplate('events-tokens'));

const events = (token: string) => openSse(`${base}/inspect/movements/${movement.id}/events`, { Authorization: `Bearer ${token}` });

async function ready(s: SseReader): Promise<void> {
  assert.equal(s.status, 200, JSON.stringify(s.error));
  assert.equal((await s.next()).event, 'ready');
  for (let i = 0; i < 4; i++) assert.equal((await s.next()).event, 'transition', 'the creation is replayed');
}

test('configuration: the re-check interval is at most 30 s, the cap at least 1', () => {
  assert.equal(loadConfig({}).streamTokenRecheckSeconds, 15);
  assert.equal(loadConfig({}).streamMaxPerToken, 4);
  assert.throws(() => loadConfig({ FERRY_STREAM_TOKEN_RECHECK_SECONDS: '31' }), /FERRY_STREAM_TOKEN_RECHECK_SECONDS/);
  assert.throws(() => loadConfig({ FERRY_STREAM_MAX_PER_TOKEN: '0' }), /FERRY_STREAM_MAX_PER_TOKEN/);
});

test('revoking a token ends its open stream; another token\'s stream stays live', async () => {
  const doomed = await createToken(db.pool, { name: 'events-doomed', role: 'viewer' });
  const kept = await createToken(db.pool, { name: 'events-kept', role: 'viewer' });
  const a = await events(doomed.token);
  const b = await events(kept.token);
  await ready(a);
  await ready(b);

  await revokeToken(db.pool, doomed.id);
  const tail = await a.untilClosed(10_000);
  assert.deepEqual(tail.at(-1), { event: 'end', data: JSON.stringify({ reason: 'token_no_longer_valid' }) }, 'the stream says why it ends');

  // The other stream went through the same checks and still carries the next commit.
  await withTransaction(db.pool, (c) =>
    deliverMovementEvent(c, movement.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: collectingDeps() }),
  );
  assert.equal(JSON.parse((await b.nextEvent('transition')).data!).event_type, 'APPROVE');

  // A reconnect with the revoked token is refused like any other request.
  const again = await events(doomed.token);
  assert.equal(again.status, 401);
  assert.equal(again.error.error.code, 'UNAUTHENTICATED');
  b.close();
  await waitFor('the streams to be cleaned up', async () => openEventStreams() === 0, 10_000);
});

test('one token holds at most FERRY_STREAM_MAX_PER_TOKEN streams; the next is 429 TOO_MANY_STREAMS', async () => {
  const busy = await createToken(db.pool, { name: 'events-busy', role: 'viewer' });
  const other = await createToken(db.pool, { name: 'events-other', role: 'viewer' });
  const open: SseReader[] = [];
  for (let i = 0; i < 3; i++) open.push(await events(busy.token));
  for (const s of open) await ready(s);

  const refused = await events(busy.token);
  assert.equal(refused.status, 429);
  assert.equal(refused.error.error.code, 'TOO_MANY_STREAMS');
  assert.equal(refused.error.error.details.limit, 3);

  // Opened at the same moment, still no more than the cap get through.
  const burst = await Promise.all([events(busy.token), events(busy.token)]);
  assert.deepEqual(burst.map((s) => s.status), [429, 429]);

  // The cap is per token.
  const theirs = await events(other.token);
  await ready(theirs);

  // Closing one frees its place (once the server has seen the disconnect).
  open.pop()!.close();
  let next: SseReader | undefined;
  await waitFor('a freed place on the cap', async () => {
    const s = await events(busy.token);
    if (s.status === 200) next = s;
    return s.status === 200;
  }, 10_000);
  await ready(next!);
  for (const s of [...open, next!, theirs]) s.close();
  await waitFor('the streams to be cleaned up', async () => openEventStreams() === 0, 10_000);
});
