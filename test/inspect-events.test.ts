import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Hono } from 'hono';
import { deliverMovementEvent } from '../src/durable/transition.ts';
import { installErrorHandling } from '../src/http/errors.ts';
import { EventStreams, inspectRoutes, type StreamOptions } from '../src/http/inspect.ts';
import { withTransaction } from '../src/persistence/db.ts';
import { createToken } from '../src/persistence/tokens.ts';
import { testDatabase } from './helpers/db.ts';
import { collectingDeps, seedMovement, threeNodeTemplate } from './helpers/fixtures.ts';
import { serveApp } from './helpers/http.ts';
import { openSse } from './helpers/sse.ts';
import { waitFor } from './helpers/wait.ts';

/**
 * The live stream over a real HTTP server, as a browser reads it. The safety-net poll is set far
 * beyond the test's waits, so every live event here can only have come through LISTEN/NOTIFY.
 */

const db = await testDatabase();
const token = (await createToken(db.pool, { name: 'events-viewer', role: 'viewer' })).token;

/** A server of its own with an event-stream registry of its own, as each app has. */
async function server(stream: Partial<StreamOptions>): Promise<{ url: string; streams: EventStreams }> {
  const app = new Hono();
  installErrorHandling(app);
  const streams = new EventStreams();
  app.route('/', inspectRoutes({ pool: db.pool, stream, streams }));
  // Streams a failed test left open are cut when the file ends, so they cannot keep it running.
  const { url } = await serveApp(app);
  return { url, streams };
}

const liveServer = await server({ pollMs: 600_000, heartbeatMs: 600_000 });
const chattyServer = await server({ pollMs: 600_000, heartbeatMs: 50 });
const live = liveServer.url;
const chatty = chattyServer.url;
const openEventStreams = () => liveServer.streams.size + chattyServer.streams.size;

/** The movement's event stream, as a browser reads it; nextTransition() passes over heartbeats. */
async function open(base: string, movementId: string, headers: Record<string, string> = {}, query = '') {
  const s = await openSse(`${base}/inspect/movements/${movementId}/events${query}`, { Authorization: `Bearer ${token}`, ...headers });
  assert.equal(s.status, 200, JSON.stringify(s.error));
  const nextTransition = async () => {
    const m = await s.nextEvent('transition');
    return { sseId: Number(m.id), t: JSON.parse(m.data!) };
  };
  return { ...s, nextTransition };
}

test('the stream replays the log, then pushes each transition as it commits', async () => {
  const { movement } = await seedMovement(db.pool, threeNodeTemplate('events-live'));
  const s = await open(live, movement.id);
  assert.equal((await s.next()).event, 'ready');

  // The creation: the request and its three nodes, each at seq 0.
  const created = [];
  for (let i = 0; i < 4; i++) created.push(await s.nextTransition());
  assert.deepEqual(created.map((c) => c.t.event_type), ['xstate.init', 'xstate.init', 'xstate.init', 'xstate.init']);
  for (const c of created) assert.equal(c.sseId, c.t.id, 'the SSE id is the transition id');

  // Approval commits while the stream waits: it arrives without any poll.
  await withTransaction(db.pool, (c) =>
    deliverMovementEvent(c, movement.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: collectingDeps() }),
  );
  const approve = await s.nextTransition();
  assert.equal(approve.t.event_type, 'APPROVE');
  assert.equal(approve.t.from_state, 'PENDING_APPROVAL');
  assert.equal(approve.t.to_state, 'APPROVED');
  const unblocked = await s.nextTransition();
  assert.equal(unblocked.t.node_key, 'withdraw');
  assert.equal(unblocked.t.to_state, 'READY');
  assert.ok(unblocked.sseId > approve.sseId && approve.sseId > created[3].sseId, 'ids increase');
  s.close();

  // Resuming with Last-Event-ID sends only what came after it.
  const resumed = await open(live, movement.id, { 'Last-Event-ID': String(created[1].sseId) });
  assert.equal((await resumed.next()).event, 'ready');
  const again = [];
  for (let i = 0; i < 4; i++) again.push((await resumed.nextTransition()).sseId);
  assert.deepEqual(again, [created[2].sseId, created[3].sseId, approve.sseId, unblocked.sseId]);
  resumed.close();

  // ?after= does the same for a first connection.
  const fromQuery = await open(live, movement.id, {}, `?after=${approve.sseId}`);
  await fromQuery.next();
  assert.equal((await fromQuery.nextTransition()).sseId, unblocked.sseId);
  fromQuery.close();
});

test('other movements\' transitions do not reach a stream', async () => {
  const mine = (await seedMovement(db.pool, threeNodeTemplate('events-mine'))).movement.id;
  const other = (await seedMovement(db.pool, threeNodeTemplate('events-other'))).movement.id;
  const s = await open(live, mine);
  await s.next();
  for (let i = 0; i < 4; i++) await s.nextTransition(); // its creation
  const approve = (id: string) =>
    withTransaction(db.pool, (c) =>
      deliverMovementEvent(c, id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: collectingDeps() }),
    );
  await approve(other);
  await approve(mine);
  const first = await s.nextTransition();
  assert.equal(first.t.entity_id, mine, 'the first live event is this movement\'s approval, not the other one');
  assert.equal(first.t.event_type, 'APPROVE');
  s.close();
});

test('heartbeats keep a quiet stream open', async () => {
  const { movement } = await seedMovement(db.pool, threeNodeTemplate('events-quiet'));
  const s = await open(chatty, movement.id);
  assert.equal((await s.next()).event, 'ready');
  for (let i = 0; i < 4; i++) assert.equal((await s.next()).event, 'transition', 'the creation comes first');
  // Then the movement is quiet: the stream sends heartbeat comments and nothing else.
  for (let i = 0; i < 3; i++) assert.deepEqual(await s.next(), { comment: 'heartbeat' });
  // And it is still the live stream: the next commit comes through it.
  await withTransaction(db.pool, (c) =>
    deliverMovementEvent(c, movement.id, { type: 'APPROVE', by: 'approver', at: new Date().toISOString() }, { actor: 'approver', deps: collectingDeps() }),
  );
  const approve = await s.nextTransition();
  assert.equal(approve.t.event_type, 'APPROVE');
  assert.equal(approve.t.entity_id, movement.id);
  s.close();
});

test('a client that goes away ends its stream and its subscription', async () => {
  const { movement } = await seedMovement(db.pool, threeNodeTemplate('events-gone'));
  const before = openEventStreams();
  const streams = await Promise.all([open(live, movement.id), open(live, movement.id), open(chatty, movement.id)]);
  for (const s of streams) assert.equal((await s.next()).event, 'ready');
  assert.equal(openEventStreams(), before + 3);
  for (const s of streams) s.close();
  await waitFor('the server to notice the disconnects', async () => openEventStreams() === before, 20_000);
  // The shared LISTEN connection closes with the last stream.
  await waitFor('the listen connection to close', async () => {
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'ferry-listen'`,
    );
    return rows[0].n === 0;
  }, 20_000);
});

test('shutdown ends every open stream of its own app at once, and no other app\'s', async () => {
  const { movement } = await seedMovement(db.pool, threeNodeTemplate('events-shutdown'));
  const streams = await Promise.all([open(live, movement.id), open(live, movement.id), open(chatty, movement.id)]);
  for (const s of streams) assert.equal((await s.next()).event, 'ready');
  assert.equal(liveServer.streams.size, 2);
  assert.equal(chattyServer.streams.size, 1);

  await liveServer.streams.end();
  assert.equal(liveServer.streams.size, 0);
  for (const s of streams.slice(0, 2)) {
    // What was already sent is still readable; then the stream ends.
    await s.untilClosed();
  }
  // The other app's stream is untouched: still open, still heartbeating.
  assert.equal(chattyServer.streams.size, 1);
  const other = streams[2];
  for (let i = 0; i < 4; i++) assert.equal((await other.next()).event, 'transition');
  assert.deepEqual(await other.next(), { comment: 'heartbeat' });
  // A stopping app opens no new stream.
  const refused = await fetch(`${live}/inspect/movements/${movement.id}/events`, { headers: { Authorization: `Bearer ${token}` } });
  assert.equal(refused.status, 503);
  assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'SERVICE_UNAVAILABLE');

  await chattyServer.streams.end();
  assert.equal(openEventStreams(), 0);
  await other.untilClosed();
});
