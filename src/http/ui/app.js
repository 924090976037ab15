// Ferry's visualizer: one page over the inspection API (/inspect/*), no dependencies. It also shows
// template proposals, standing orders with their runs, the treasury policy (address book, rules,
// policy proposals), resolutions of movements that need a person, and the worker processes with
// their sweeps, and acts on all but the last, through the
// same /v3 routes the CLI uses, with the same token. Diagrams are
// SVG laid out by layout.js (layered, ordered to keep crossings down, boxes sized to their text).
//
// Time travel: the page keeps a movement's whole transition log; position k shows every entity in
// the state the first k transitions left it in. "Live" means k follows the end of the log, which
// grows from the server-sent event stream.

import { DAG, LINE, layoutMachine, layoutPlan } from '/ui/layout.js';

const SVG_NS = 'http://www.w3.org/2000/svg';
const TOKEN_KEY = 'ferry.token';
const LIST_REFRESH_MS = 4000;
const LIST_PAGE = 100;
const REQUEST_STATES = ['PENDING_APPROVAL', 'APPROVED', 'EXECUTING', 'WAITING_MANUAL_ACTION', 'MANUAL_INTERVENTION',
  'COMPLETED', 'FAILED', 'REJECTED', 'EXPIRED', 'CANCELLED'];

const $ = (id) => document.getElementById(id);

/** The selection that stands for the movement itself: no node key holds a colon, so none is taken for it. */
const MOVEMENT = ':movement';

const ui = {
  token: sessionStorage.getItem(TOKEN_KEY),
  machines: new Map(), // machine id -> { view, layout }
  movementId: null,
  detail: null,
  transitions: [],
  position: null, // null: follow live; else how many transitions are applied
  selected: MOVEMENT, // MOVEMENT or a node key
  stream: null, // AbortController of the open event stream
  streamStatus: 'idle',
  listTimer: null,
  listSeq: 0, // number of the latest list request: only its answer is drawn
  listed: null, // { movements, state, more } of the latest list answer (more: older pages follow)
  listPages: 1, // pages of the movement list on show ("Show older" adds one)
  renderQueued: false,
  view: 'movements', // or 'proposals', 'standing-orders', 'policy', 'workers'
  resolutions: [], // the open movement's resolutions (GET /v3/movements/{id}/resolutions)
  proposalId: null,
  proposal: null, // the open proposal's detail
  proposalSeq: 0,
  standingOrderId: null,
  standingOrder: null, // the open standing order's detail (order, runs, history)
  standingOrderSeq: 0,
  workers: null, // the latest GET /v3/workers answer on show
  workersSeq: 0,
  policyProposalId: null, // the open policy proposal (null: the book and rules are on show)
  policyProposal: null,
  policySeq: 0,
};

// ------------------------------------------------------------------------------------------------
// Talking to Ferry

class Unauthenticated extends Error {}

/** A refusal from Ferry, with its stable error code (FOUR_EYES_VIOLATION, FORBIDDEN, ...). */
class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details ?? null;
  }
}

/** GET by default; `body` (sent as JSON) makes it a POST. */
async function api(path, body) {
  const init = { headers: { Authorization: `Bearer ${ui.token}`, Accept: 'application/json' } };
  if (body !== undefined) {
    init.method = 'POST';
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  if (res.status === 401) {
    signOut('Ferry refused that token; sign in again.');
    throw new Unauthenticated();
  }
  const answer = await res.json().catch(() => null);
  if (!res.ok) throw new ApiError(res.status, answer?.error?.code ?? null, answer?.error?.message ?? `HTTP ${res.status}`, answer?.error?.details);
  return answer;
}

/** Shows a refusal in an error line: the code Ferry answered, then its message. */
function showError(id, err) {
  const line = $(id);
  line.dataset.code = err.code ?? '';
  line.textContent = err.code ? `${err.code}: ${err.message}` : err.message;
}

function clearError(id) {
  const line = $(id);
  line.dataset.code = '';
  line.textContent = '';
}

/** Reads a text/event-stream body and calls onEvent({ event, data, id }) per message. */
async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut;
    while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, '');
      const msg = { event: 'message', data: '', id: null };
      const data = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith(':')) continue; // heartbeat
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        const val = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (field === 'event') msg.event = val;
        else if (field === 'data') data.push(val);
        else if (field === 'id') msg.id = val;
      }
      if (data.length) onEvent({ ...msg, data: data.join('\n') });
    }
  }
}

// EventSource cannot send an Authorization header; fetch can, and resuming is ours to do anyway.
async function follow(id) {
  const ctl = new AbortController();
  ui.stream = ctl;
  let backoff = 1000;
  while (!ctl.signal.aborted && ui.movementId === id) {
    try {
      const last = ui.transitions.length ? ui.transitions[ui.transitions.length - 1].id : 0;
      const res = await fetch(`/inspect/movements/${id}/events`, {
        headers: { Authorization: `Bearer ${ui.token}`, Accept: 'text/event-stream', 'Last-Event-ID': String(last) },
        signal: ctl.signal,
      });
      if (res.status === 401) return signOut('Ferry refused that token; sign in again.');
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      backoff = 1000;
      await readEvents(res.body, (msg) => {
        // 'ready' comes once Ferry listens for this movement's commits: from here on nothing is missed.
        if (msg.event === 'ready') setStreamStatus('live');
        else if (msg.event === 'transition') addTransition(JSON.parse(msg.data));
      });
    } catch (err) {
      if (ctl.signal.aborted) return;
    }
    setStreamStatus('reconnecting');
    await new Promise((r) => setTimeout(r, backoff));
    backoff = Math.min(backoff * 2, 10000);
  }
}

function stopFollowing() {
  ui.stream?.abort();
  ui.stream = null;
  setStreamStatus('idle');
}

/** Shows the stream's state (when given) and whether the page is showing the past. */
function setStreamStatus(status) {
  if (status) ui.streamStatus = status;
  const el = $('stream-status');
  const shown = ui.streamStatus === 'live' && ui.position !== null ? 'paused' : ui.streamStatus;
  el.dataset.status = shown;
  el.textContent = { idle: '', live: 'live', reconnecting: 'reconnecting...', paused: 'live (viewing the past)' }[shown];
}

// ------------------------------------------------------------------------------------------------
// Sign in

function signOut(message) {
  stopFollowing();
  clearInterval(ui.listTimer);
  stopBalances();
  stopWaiting();
  ui.token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  // Nothing of this session stays on the page for the next token to see before it reads its own.
  // (Answers still in flight are dropped: the lists' numbers move on, the ids no longer match.)
  Object.assign(ui, { movementId: null, detail: null, transitions: [], resolutions: [], proposalId: null, proposal: null, standingOrderId: null, standingOrder: null, listed: null, listPages: 1, policyProposalId: null, policyProposal: null, workers: null });
  Object.assign(policy, { book: [], rules: null, base: null });
  ui.listSeq++;
  ui.policySeq++;
  ui.proposalSeq++;
  ui.standingOrderSeq++;
  ui.workersSeq++;
  clearWorkers();
  $('movement').hidden = true;
  $('proposal').hidden = true;
  $('standing-order').hidden = true;
  $('standing-order-new').hidden = true;
  showPolicyView('none');
  resetProposeForm();
  for (const id of ['book-form', 'rules-form', 'try-form']) $(id).reset();
  for (const id of ['try-template', 'rules', 'policy-diff', 'policy-proposals']) $(id).replaceChildren();
  for (const id of ['book', 'limits', 'policy-proposal-history']) $(id).tBodies[0].replaceChildren();
  $('try-result').textContent = '';
  $('try-result').hidden = true;
  for (const id of ['movements', 'proposals', 'standing-orders']) $(id).replaceChildren();
  for (const id of ['standing-order-runs', 'standing-order-history']) $(id).tBodies[0].replaceChildren();
  drawResolutions();
  for (const id of ['resolution-error', 'gate-error', 'proposal-error', 'decision-error', 'standing-order-error', 'standing-order-new-error', 'workers-error',
    'book-error', 'book-form-error', 'rules-error', 'try-error', 'policy-proposal-error']) clearError(id);
  $('app').hidden = true;
  $('views').hidden = true;
  $('sign-out').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message ?? '';
}

async function start() {
  if (!ui.token) return signOut();
  $('login').hidden = true;
  $('app').hidden = false;
  $('views').hidden = false;
  $('sign-out').hidden = false;
  try {
    const { machines } = await api('/inspect/machines');
    for (const view of machines) ui.machines.set(view.id, { view, layout: layoutMachine(view) });
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    throw err;
  }
  await refreshList();
  startBalances();
  startWaiting();
  clearInterval(ui.listTimer);
  ui.listTimer = setInterval(() => {
    if (!document.hidden) void refreshCurrent().catch(() => {});
  }, LIST_REFRESH_MS);
  await route();
}

/** The poll: the list of the view on show (and the open proposal, which sweeps may decide). */
function refreshCurrent() {
  if (ui.view === 'workers') return refreshWorkers();
  if (ui.view === 'policy') return Promise.all([refreshPolicyProposals(), ui.policyProposalId ? openPolicyProposal(ui.policyProposalId, true) : openPolicyOverview(true)]);
  if (ui.view === 'standing-orders') return Promise.all([refreshStandingOrders(), ui.standingOrderId ? openStandingOrder(ui.standingOrderId, true) : null]);
  if (ui.view !== 'proposals') return refreshList();
  return Promise.all([refreshProposals(), ui.proposalId ? openProposal(ui.proposalId, true) : null]);
}

// ------------------------------------------------------------------------------------------------
// Movement list

/**
 * Reads the list from Ferry. Answers can come back out of order (a poll and a filter change in flight
 * together): only the answer to the latest call is drawn, so an older one never overwrites it.
 */
async function refreshList() {
  const seq = ++ui.listSeq;
  const state = $('state-filter').value;
  // The first page, and as many older ones (following next_cursor) as "Show older" asked for, so a
  // poll keeps what is on show.
  const movements = [];
  let cursor = null;
  for (let page = 0; page < ui.listPages; page++) {
    const query = new URLSearchParams({ limit: String(LIST_PAGE) });
    if (state) query.set('state', state);
    if (cursor) query.set('cursor', cursor);
    const answer = await api(`/inspect/movements?${query}`);
    if (seq !== ui.listSeq) return;
    movements.push(...answer.movements);
    cursor = answer.next_cursor;
    if (!cursor) break;
  }
  ui.listed = { movements, state, more: cursor !== null };
  drawList();
}

function showOlder() {
  ui.listPages++;
  void refreshList().catch(() => {});
}

function drawList() {
  const { movements, state, more } = ui.listed;
  const list = $('movements');
  list.replaceChildren();
  if (movements.length === 0) {
    const li = el('li', { class: 'none' }, state ? `No movement is ${state}.` : 'No movements yet.');
    list.append(li);
    return;
  }
  for (const m of movements) {
    const card = m.card ?? {};
    const what = [card.amount, card.asset].filter(Boolean).join(' ');
    const li = el('li', { 'data-id': m.id, class: m.id === ui.movementId ? 'selected' : '' },
      el('div', { class: 'row' }, el('b', {}, m.template_key), el('span', { class: 'badge' })),
      what || card.destination
        ? el('div', { class: 'card', 'data-amount': card.amount ?? '', 'data-asset': card.asset ?? '' },
          what || '-', card.destination ? el('span', { class: 'to', title: card.destination }, ` to ${shortAddress(card.destination)}`) : '')
        : '',
      card.error ? el('div', { class: 'card-error', 'data-code': card.error.code, title: `node ${card.error.node_key}` }, `${card.error.node_key}: ${card.error.code}`) : '',
      el('div', { class: 'id' }, m.id),
      el('div', { class: 'nodes' }));
    li.addEventListener('click', () => { location.hash = `#/movements/${m.id}`; });
    list.append(li);
    drawListRow(li, m);
  }
  if (more) {
    const button = el('button', { type: 'button', id: 'list-older' }, 'Show older movements');
    button.addEventListener('click', showOlder);
    list.append(el('li', { class: 'more' }, button));
  }
}

/**
 * One row of the list. The open movement's row shows what its detail pane shows: the live end of the
 * transition stream, which moves with every commit, where the polled overview would lag behind it (a
 * poll is skipped while the tab is hidden, and an answer may predate the last transitions streamed).
 */
function drawListRow(li, m) {
  const live = m.id === ui.movementId ? liveSummary() : null;
  const movementState = live?.movementState ?? m.state;
  const nodeStates = live?.nodeStates ?? m.node_states;
  const total = live?.total ?? m.nodes_total;
  const done = (nodeStates.COMPLETED ?? 0) + (nodeStates.SKIPPED ?? 0);
  const badge = li.querySelector('.badge');
  badge.className = `badge s-${movementState}`;
  badge.textContent = movementState;
  badge.dataset.state = movementState;
  const nodes = li.querySelector('.nodes');
  nodes.dataset.done = String(done);
  nodes.dataset.total = String(total);
  nodes.textContent = `${done}/${total} nodes done - ${new Date(m.created_at).toLocaleString()}`;
}

/** The open movement's state and per-state node counts at the live end of its log, when the page has it. */
function liveSummary() {
  const d = ui.detail;
  if (!d || d.movement.id !== ui.movementId) return null;
  const at = statesAt(ui.transitions.length);
  const nodeStates = {};
  for (const n of d.nodes) {
    const state = at.nodes.get(n.node_key)?.state ?? n.state;
    nodeStates[state] = (nodeStates[state] ?? 0) + 1;
  }
  return { movementState: at.movement.state ?? d.movement.state, nodeStates, total: d.nodes.length };
}

/** Redraws the open movement's list row (after a transition arrived or the page loaded it). */
function drawOpenListRow() {
  if (!ui.listed || !ui.movementId) return;
  const m = ui.listed.movements.find((x) => x.id === ui.movementId);
  const li = [...$('movements').children].find((x) => x.dataset.id === ui.movementId);
  if (m && li) drawListRow(li, m);
}

// ------------------------------------------------------------------------------------------------
// Balances panel: the latest watched balances (GET /v3/balances), refreshed with the list. Shown
// only when Ferry watches any; a stale balance is marked, with the class of its last fetch error.

const BALANCES_REFRESH_MS = 10000;
const balances = { timer: null, chartKey: null };

function startBalances() {
  stopBalances();
  void refreshBalances().catch(() => {});
  balances.timer = setInterval(() => {
    if (!document.hidden) void refreshBalances().catch(() => {});
  }, BALANCES_REFRESH_MS);
}

function stopBalances() {
  clearInterval(balances.timer);
  balances.timer = null;
}

/** 0x1234...abcd for an EVM address; anything else as it is, cut at 24 characters. */
function shortAddress(a) {
  if (/^0x[0-9a-fA-F]{40}$/.test(a)) return `${a.slice(0, 6)}...${a.slice(-4)}`;
  return a.length > 24 ? `${a.slice(0, 21)}...` : a;
}

/**
 * An amount on one line of the narrow balances panel: at most six decimals shown, cut (never rounded)
 * and marked with an ellipsis when there are more; the exact amount is the cell's title.
 */
function shortAmount(a) {
  const [whole, fraction] = a.split('.');
  if (!fraction || fraction.length <= 6) return a;
  return `${whole}.${fraction.slice(0, 6)}\u2026`;
}

function shortWallet(w) {
  return /^0x[0-9a-f]{40}$/.test(w) ? `${w.slice(0, 6)}...${w.slice(-4)}` : w;
}

async function refreshBalances() {
  const { balances: rows, next_cursor } = await api('/v3/balances?limit=200');
  const panel = $('balances-panel');
  panel.hidden = rows.length === 0;
  const body = $('balances').querySelector('tbody');
  body.replaceChildren();
  const stale = rows.filter((b) => b.stale).length;
  $('balances-note').textContent = `- ${rows.length}${next_cursor ? '+' : ''}${stale ? `, ${stale} stale` : ''}`;
  for (const b of rows) {
    const when = b.as_of ? `as of ${new Date(b.as_of).toLocaleString()}` : 'never fetched';
    const why = b.error ? ` - last fetch failed: ${b.error.code}` : '';
    const row = el('tr', { class: `${b.stale ? 'stale' : ''} ${balances.chartKey === balanceKey(b) ? 'charted' : ''}`.trim(), title: `${b.chain} ${b.wallet}\n${when}${why}\n(click: history)` },
      el('td', { class: 'wallet' }, b.label ?? shortWallet(b.wallet)),
      el('td', { class: 'asset', title: b.asset }, b.symbol ?? shortAddress(b.asset), el('div', { class: 'chain' }, `chain ${b.chain_id ?? b.chain}`)),
      el('td', { class: 'amount', title: b.amount ?? '' }, b.amount ? shortAmount(b.amount) : '-',
        b.stale ? el('div', { class: 'stale-badge' }, b.error ? `stale: ${b.error.code}` : 'stale') : ''));
    row.addEventListener('click', () => void showBalanceHistory(b).catch(() => {}));
    body.append(row);
  }
  void refreshForeignTransfers().catch(() => {});
}

// Exchange transfers no movement made (GET /v3/cex-transfers, the cex_transfer_ingest sidecar):
// listed under the balances, marked as needing attention.
async function refreshForeignTransfers() {
  const { transfers } = await api('/v3/cex-transfers?limit=20');
  const box = $('foreign-transfers');
  box.hidden = transfers.length === 0;
  if (transfers.length > 0) $('balances-panel').hidden = false;
  box.replaceChildren(el('h3', {}, `Transfers no movement made `, el('span', { class: 'hint' }, `- ${transfers.length}`)),
    el('ul', { class: 'foreign-transfers' }, ...transfers.map((t) => el('li', { class: 'attention', title: `${t.venue} ${t.provider_id}${t.tx_id ? `\ntx ${t.tx_id}` : ''}` },
      `${t.direction === 'deposit' ? 'deposit' : 'withdrawal'} ${t.amount} ${t.asset}${t.network ? ` (${t.network})` : ''} on ${t.venue}`,
      el('div', { class: 'chain' }, new Date(t.occurred_at).toLocaleString())))));
}

// A balance's history (GET /v3/balances/history): hourly buckets drawn as a small inline SVG, the
// band from each bucket's lowest to highest amount and a line through the last amounts.

const balanceKey = (b) => `${b.chain} ${b.wallet} ${b.asset}`;

async function showBalanceHistory(b) {
  balances.chartKey = balanceKey(b);
  for (const tr of $('balances').querySelectorAll('tbody tr')) tr.classList.remove('charted');
  const query = new URLSearchParams({ chain: b.chain, address: b.wallet, asset: b.asset, bucket: 'hour', limit: '168' });
  const history = await api(`/v3/balances/history?${query}`);
  const box = $('balance-chart');
  box.hidden = false;
  box.replaceChildren(el('div', { class: 'chart-title' }, `${b.label ?? shortWallet(b.wallet)} ${b.symbol ?? b.asset}: hourly, last ${history.points.length} hours with snapshots`),
    history.points.length === 0 ? el('div', { class: 'hint' }, 'No history yet (the balance_history_rollup sidecar folds snapshots every few minutes).') : balanceChart(history.points));
}

function balanceChart(points) {
  const W = 260;
  const H = 80;
  const pad = 4;
  // Amounts are exact decimal strings; a chart needs only their shape, so Number is close enough.
  const lo = Math.min(...points.map((p) => Number(p.min)));
  const hi = Math.max(...points.map((p) => Number(p.max)));
  const span = hi - lo || 1;
  const x = (i) => pad + (points.length === 1 ? (W - 2 * pad) / 2 : (i * (W - 2 * pad)) / (points.length - 1));
  const y = (v) => H - pad - ((Number(v) - lo) / span) * (H - 2 * pad);
  const band = [...points.map((p, i) => `${x(i)},${y(p.max)}`), ...points.map((p, i) => `${x(i)},${y(p.min)}`).reverse()].join(' ');
  const line = points.map((p, i) => `${x(i)},${y(p.last)}`).join(' ');
  const last = points[points.length - 1];
  return svgEl('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'balance-chart', role: 'img', 'aria-label': `balance history, ${points.length} buckets` },
    svgEl('polygon', { points: band, class: 'band' }),
    svgEl('polyline', { points: line, class: 'line' }),
    ...points.map((p, i) => svgEl('circle', { cx: x(i), cy: y(p.last), r: 1.8, class: 'dot' },
      svgEl('title', {}, `${new Date(p.bucket_start).toLocaleString()}: last ${p.last} (min ${p.min}, max ${p.max}, ${p.samples} snapshots)`))),
    svgText(W - pad, 10, `${last.last}`, 'chart-label', 'end'));
}

// ------------------------------------------------------------------------------------------------
// Waiting too long (GET /v3/attention/waiting-too-long): movements the capital transfer follow-up
// surfaced that still wait (approval not given, a manual gate untouched, a node observed too long).
// Shown only when there are any; a row opens its movement.

const WAITING_REASONS = {
  approval_not_given: () => 'approval not given',
  manual_gate_untouched: (w) => `manual gate ${w.node_key}`,
  node_observed_too_long: (w) => `node ${w.node_key} observed`,
  waiting_in_state: (w) => w.request_state,
};
const waiting = { timer: null };

function startWaiting() {
  stopWaiting();
  void refreshWaiting().catch(() => {});
  void refreshRegistryDrift().catch(() => {});
  waiting.timer = setInterval(() => {
    if (document.hidden) return;
    void refreshWaiting().catch(() => {});
    void refreshRegistryDrift().catch(() => {});
  }, BALANCES_REFRESH_MS);
}

function stopWaiting() {
  clearInterval(waiting.timer);
  waiting.timer = null;
}

async function refreshWaiting() {
  const { movements: rows } = await api('/v3/attention/waiting-too-long?limit=100');
  $('waiting-panel').hidden = rows.length === 0;
  $('waiting-note').textContent = `- ${rows.length}`;
  const body = $('waiting').querySelector('tbody');
  body.replaceChildren();
  for (const w of rows) {
    const tr = el('tr', { class: 'stale', title: `${w.movement_id} (${w.template_key}), ${w.request_state}; too long after ${w.age_seconds} s` },
      el('td', { class: 'wallet' }, `${w.template_key} ${w.movement_id.slice(0, 8)}`),
      el('td', {}, WAITING_REASONS[w.reason] ? WAITING_REASONS[w.reason](w) : w.reason),
      el('td', {}, new Date(w.waiting_since).toLocaleString()));
    tr.addEventListener('click', () => { location.hash = `#/movements/${w.movement_id}`; });
    body.append(tr);
  }
}

// Registry drift (GET /v3/registry-drift, the verify_drift sidecar): on-chain facts of the lanes'
// configuration that the chain contradicts (a token's decimals, a CCTP domain, an OFT peer, a
// bridge without code), and how many facts the last check could not verify. Shown only when there
// are any. Every value is set as text: what a chain answered is never markup.

async function refreshRegistryDrift() {
  const { drifts, unverified } = await api('/v3/registry-drift?limit=50');
  $('drift-panel').hidden = drifts.length === 0 && unverified.length === 0;
  $('drift-note').textContent = `- ${drifts.length} open${unverified.length ? `, ${unverified.length} unverified` : ''}`;
  const body = $('drift').querySelector('tbody');
  body.replaceChildren();
  for (const d of drifts) {
    body.append(el('tr', { class: 'stale', title: `${d.lane} lane, chain ${d.chain_id}, ${d.address}\nfirst seen ${new Date(d.first_seen).toLocaleString()}, last seen ${new Date(d.last_seen).toLocaleString()}` },
      el('td', { class: 'wallet' }, `${d.subject} ${d.property}`, el('div', { class: 'chain' }, `chain ${d.chain_id}`)),
      el('td', {}, d.expected),
      el('td', {}, d.observed)));
  }
  for (const u of unverified) {
    body.append(el('tr', { title: `${u.lane} lane, chain ${u.chain_id}, ${u.address}\nchecked ${new Date(u.checked_at).toLocaleString()}` },
      el('td', { class: 'wallet' }, `${u.subject} ${u.property}`, el('div', { class: 'chain' }, `chain ${u.chain_id}`)),
      el('td', {}, u.expected),
      el('td', { class: 'hint' }, `unverified: ${u.error_code}`)));
  }
}

// ------------------------------------------------------------------------------------------------
// One movement

async function route() {
  if (/^#\/workers\/?$/.test(location.hash)) {
    showView('workers');
    stopFollowing();
    Object.assign(ui, { movementId: null, proposalId: null, proposal: null, standingOrderId: null, standingOrder: null });
    await refreshWorkers().catch((err) => {
      if (!(err instanceof Unauthenticated)) throw err;
    });
    return;
  }
  const pol = /^#\/policy(?:\/([0-9a-fA-F-]{36}))?$/.exec(location.hash);
  if (pol) {
    showView('policy');
    stopFollowing();
    Object.assign(ui, { movementId: null, proposalId: null, proposal: null, standingOrderId: null, standingOrder: null });
    await refreshPolicyProposals().catch((err) => {
      if (!(err instanceof Unauthenticated)) throw err;
    });
    if (pol[1]) await openPolicyProposal(pol[1]);
    else await openPolicyOverview();
    return;
  }
  ui.policyProposalId = null;
  ui.policyProposal = null;
  const orders = /^#\/standing-orders(?:\/([0-9a-fA-F-]{36}|new))?$/.exec(location.hash);
  if (orders) {
    showView('standing-orders');
    stopFollowing();
    ui.movementId = null;
    ui.proposalId = null;
    await refreshStandingOrders().catch((err) => {
      if (!(err instanceof Unauthenticated)) throw err;
    });
    if (orders[1] === 'new') await openProposeForm();
    else if (orders[1]) await openStandingOrder(orders[1]);
    else closeStandingOrder();
    return;
  }
  ui.standingOrderId = null;
  ui.standingOrder = null;
  const proposals = /^#\/proposals(?:\/([0-9a-fA-F-]{36}))?$/.exec(location.hash);
  showView(proposals ? 'proposals' : 'movements');
  if (proposals) {
    stopFollowing();
    ui.movementId = null;
    await refreshProposals().catch((err) => {
      if (!(err instanceof Unauthenticated)) throw err;
    });
    if (proposals[1]) await openProposal(proposals[1]);
    else closeProposal();
    return;
  }
  ui.proposalId = null;
  ui.proposal = null;
  const match = /^#\/movements\/([0-9a-fA-F-]{36})$/.exec(location.hash);
  if (!match) {
    stopFollowing();
    ui.movementId = null;
    $('movement').hidden = true;
    $('empty').hidden = false;
    return;
  }
  await openMovement(match[1]);
}

async function openMovement(id) {
  stopFollowing();
  Object.assign(ui, { movementId: id, detail: null, transitions: [], position: null, selected: MOVEMENT });
  let detail;
  let resolutions;
  try {
    // Read together, so the page never draws the movement without its resolutions.
    [detail, resolutions] = await Promise.all([
      api(`/inspect/movements/${id}`),
      api(`/v3/movements/${id}/resolutions`).then((r) => r.resolutions, () => []),
    ]);
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    $('empty').hidden = false;
    $('movement').hidden = true;
    $('empty').querySelector('p').textContent = `Cannot show movement ${id}: ${err.message}`;
    return;
  }
  if (ui.movementId !== id) return;
  ui.detail = detail;
  ui.transitions = detail.transitions;
  ui.resolutions = resolutions;
  clearError('resolution-error');
  clearError('decision-error');
  $('reject-reason').value = '';
  $('resolution-reason').value = '';
  $('resolution-ref').value = '';
  $('empty').hidden = true;
  $('movement').hidden = false;
  for (const li of $('movements').children) li.classList.toggle('selected', li.dataset.id === id);
  render();
  void follow(id);
}

function addTransition(t) {
  const last = ui.transitions[ui.transitions.length - 1];
  if (last && t.id <= last.id) return;
  ui.transitions.push(t);
  scheduleRender();
  if (t.entity_type === 'request') onMovementMoved(t);
  else scheduleNodeRefresh();
}

/**
 * The log says which state a node is in, not its error or its transaction: after node transitions
 * the node rows are read again (once for a burst of transitions), so a FAILED node shows its code
 * and detail, and a sent one its transaction, without moving the slider.
 */
let nodeRefresh = null;
function scheduleNodeRefresh() {
  if (nodeRefresh) return;
  const id = ui.movementId;
  nodeRefresh = setTimeout(() => {
    nodeRefresh = null;
    void api(`/inspect/movements/${id}`).then((detail) => {
      if (ui.movementId !== id || !ui.detail) return;
      ui.detail.nodes = detail.nodes;
      scheduleRender();
    }).catch(() => {});
  }, 250);
}

function scheduleRender() {
  if (ui.renderQueued) return;
  ui.renderQueued = true;
  requestAnimationFrame(() => {
    ui.renderQueued = false;
    render();
  });
}

/** How many transitions are applied at the current position. */
function applied() {
  return ui.position === null ? ui.transitions.length : Math.min(ui.position, ui.transitions.length);
}

/** Every entity's state after the first k transitions, and the last transition of each. */
function statesAt(k) {
  const movement = { state: null, last: null };
  const nodes = new Map();
  const visited = { movement: new Set(), nodes: new Map() };
  for (let i = 0; i < k; i++) {
    const t = ui.transitions[i];
    if (t.entity_type === 'request') {
      movement.state = t.to_state;
      movement.last = t;
      visited.movement.add(t.to_state);
    } else {
      nodes.set(t.node_key, { state: t.to_state, last: t });
      if (!visited.nodes.has(t.node_key)) visited.nodes.set(t.node_key, new Set());
      visited.nodes.get(t.node_key).add(t.to_state);
    }
  }
  return { movement, nodes, visited };
}

function render() {
  const d = ui.detail;
  if (!d) return;
  const k = applied();
  const at = statesAt(k);
  const movementState = at.movement.state ?? d.movement.state;

  $('movement-title').textContent = `${d.movement.template_key} v${d.movement.template_version}`;
  $('movement-meta').textContent =
    `${d.movement.id} - created ${new Date(d.movement.created_at).toLocaleString()} by ${d.movement.created_by_name ?? d.movement.created_by}` +
    ` - plan ${d.movement.compiled_plan_hash.slice(0, 18)}...`;
  const badge = $('movement-state');
  badge.textContent = movementState;
  badge.className = `badge s-${movementState}`;
  badge.dataset.state = movementState;
  $('movement-pill').classList.toggle('selected', ui.selected === MOVEMENT);

  const liveAt = k === ui.transitions.length ? at : statesAt(ui.transitions.length);
  drawEffect();
  drawDecision(liveAt.movement.state ?? d.movement.state);
  drawNodeCard(at);
  drawAttention(liveAt);
  drawGates(liveAt);
  drawDag(d.plan, at);
  drawSelectedMachine(at);
  drawTimeline(k);
  drawLog(k);
  setStreamStatus();
  drawOpenListRow();
}

// ------------------------------------------------------------------------------------------------
// The effect (GET /inspect/movements/{id}: effect, the same as /v3 and the CLI serve) and the
// decision on it. Approve sends the plan hash drawn on the page, never one read again at the click:
// if the movement's plan is another by then, Ferry refuses it (STALE_PLAN_HASH) and the page says so.

function feeCapText(n) {
  const cap = n.fee_cap;
  if (!cap) return n.kind === 'cex_withdrawal' ? "exchange's fee" : '-';
  const parts = [];
  if (cap.max_fee_per_gas_gwei !== null) parts.push(`${cap.max_fee_per_gas_gwei} gwei/gas`);
  if (cap.cctp_max_fee !== null) parts.push(`CCTP max fee ${cap.cctp_max_fee} ${n.asset ?? ''}`.trim());
  return parts.join(', ') || '-';
}

function policyText(p) {
  if (!p) return 'Policy: none recorded (a movement from before the treasury policy).';
  if (p.action === 'no_policy') return 'Policy: no rule set was live when it was created.';
  return `Policy: rule set v${p.rule_set_version ?? '?'}, rule ${p.rule_id ?? '(default)'} - ${p.action}` +
    (p.destination_entry ? `; destination is book entry ${p.destination_entry}` : '; destination not in the address book') +
    (p.approvers_from ? `; approvals count from ${p.approvers_from.join(', ')}` : '');
}

function drawEffect() {
  const effect = ui.detail.effect;
  const panel = $('effect-panel');
  panel.hidden = !effect;
  if (!effect) return;
  $('effect-policy').textContent = policyText(effect.policy);
  $('effect-policy').dataset.rule = effect.policy?.rule_id ?? '';
  const body = $('effect').tBodies[0];
  body.replaceChildren(...effect.nodes.map((n) => {
    const to = n.destination ? `${n.destination}${n.destination_tag ? ` (tag ${n.destination_tag})` : ''}` : '-';
    const where = [n.chain, n.venue].filter(Boolean).join(' / ') +
      (n.destination_domain !== null ? ` -> CCTP domain ${n.destination_domain}${n.destination_chain_id !== null ? ` (chain ${n.destination_chain_id})` : ''}` : '');
    const from = n.source ? `${n.source}${n.source_address ? ` ${shortAddress(n.source_address)}` : ''}` : '-';
    const row = el('tr', { 'data-key': n.node_key, 'data-kind': n.kind, 'data-basis': n.basis, class: n.basis === 'unavailable' ? 'unavailable' : '' },
      el('td', {}, n.node_key),
      el('td', { title: n.executor_key ?? '' }, `${n.kind} (${n.action})`),
      el('td', { class: 'asset', title: n.asset_address ?? '' }, n.moves_funds ? (n.asset ?? '-') : ''),
      el('td', { class: 'amount', title: n.amount_base_units !== null ? `${n.amount_base_units} base units, ${n.decimals} decimals` : '' },
        n.moves_funds ? (n.basis === 'unavailable' ? `no approved effect: ${n.unavailable}` : (n.amount ?? '-')) : ''),
      el('td', { class: 'from', title: n.source_address ?? '' }, n.moves_funds ? from : ''),
      el('td', { class: 'to addr', title: to }, n.moves_funds ? to : ''),
      el('td', { class: 'where' }, n.moves_funds ? (where || '-') : ''),
      el('td', { class: 'fee' }, n.moves_funds ? feeCapText(n) : ''));
    return row;
  }));
  $('effect-warnings').replaceChildren(...effect.warnings.map((w) => el('li', {}, w)));
}

/** The approve and reject buttons, while the movement waits for approval; the hash drawn is the one sent. */
function drawDecision(movementState) {
  const m = ui.detail.movement;
  const pending = movementState === 'PENDING_APPROVAL';
  $('decision').hidden = !pending;
  const hash = $('decision-hash');
  if (hash.dataset.movement !== m.id || hash.dataset.hash !== m.compiled_plan_hash) {
    hash.dataset.movement = m.id;
    hash.dataset.hash = m.compiled_plan_hash;
    hash.textContent = m.compiled_plan_hash;
  }
  $('decision-approvals').textContent = `- approvals ${m.approvals?.length ?? 0} of ${m.approval_quorum ?? '?'}`;
  $('movement-approve').textContent = `Approve plan ${m.compiled_plan_hash.slice(0, 15)}...`;
}

async function decide(verb) {
  const id = ui.movementId;
  clearError('decision-error');
  const hash = $('decision-hash');
  let body;
  if (verb === 'approve') {
    // The hash on the screen, as drawn for this movement: what the person read is what is approved.
    if (hash.dataset.movement !== id || !hash.dataset.hash) return;
    body = { compiled_plan_hash: hash.dataset.hash };
  } else {
    const reason = $('reject-reason').value.trim();
    body = reason ? { reason } : {};
  }
  for (const b of ['movement-approve', 'movement-reject']) $(b).disabled = true;
  try {
    const answer = await api(`/v3/movements/${id}/${verb}`, body);
    if (ui.movementId === id && ui.detail) {
      // The answer's movement (approvals, state); the stream brings the transitions.
      Object.assign(ui.detail.movement, answer.movement);
      $('reject-reason').value = '';
      scheduleRender();
    }
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    showError('decision-error', err);
  } finally {
    for (const b of ['movement-approve', 'movement-reject']) $(b).disabled = false;
  }
}

/** The error code of a FAILED or UNKNOWN node the page shows in that state. */
function errorOf(key, liveState) {
  const n = ui.detail?.nodes.find((x) => x.node_key === key);
  if (!n?.error_code || !['FAILED', 'UNKNOWN'].includes(liveState ?? n.state) || (liveState ?? n.state) !== n.state) return null;
  return n.error_code;
}

/** The selected node: its state, attempt, error (code and detail), transaction and provider reference. */
function drawNodeCard(at) {
  const card = $('node-card');
  const n = ui.selected === MOVEMENT ? null : ui.detail.nodes.find((x) => x.node_key === ui.selected);
  card.hidden = !n;
  if (!n) return;
  const state = at.nodes.get(n.node_key)?.state ?? n.state;
  card.dataset.key = n.node_key;
  $('node-card-key').textContent = n.node_key;
  const badge = $('node-card-state');
  badge.textContent = state;
  badge.className = `badge s-${state}`;
  const facts = [];
  const fact = (label, value, cls = '') => facts.push(el('dt', {}, label), el('dd', { class: cls, 'data-fact': label }, value));
  fact('executor', n.executor_key ?? '-');
  fact('attempt', String(n.attempt_no));
  // The row's error belongs to the row's state: shown while the page shows that state.
  if (n.error_code && state === n.state) {
    fact('error', n.error_code, 'code');
    if (n.error_detail) fact('detail', n.error_detail);
  }
  if (n.transaction) {
    const t = n.transaction;
    const hash = t.explorer_url
      ? el('a', { href: t.explorer_url, target: '_blank', rel: 'noopener noreferrer', class: 'explorer' }, t.hash)
      : t.hash;
    fact('transaction', hash, 'hash');
    if (t.chain) fact('chain', t.chain);
  }
  if (n.provider_ref_id && n.provider_ref_id !== n.transaction?.hash) fact('provider ref', n.provider_ref_id, 'hash');
  if (n.provider_state) fact('provider state', n.provider_state);
  $('node-card-facts').replaceChildren(...facts);
}

// ------------------------------------------------------------------------------------------------
// Plan DAG

/** The longest state name a node can show, so a node's box does not grow as it moves. */
const LONGEST_NODE_STATE = 'AWAITING_SIGNATURE';

/** The second line of a node's box. */
function nodeLine(n, state) {
  if (needsPerson(n.key, state)) return `${state} - needs a person`;
  return `${state ?? 'not created yet'} - ${errorOf(n.key, state) ?? n.executor_key ?? n.action_type}`;
}

/** Every text a node's box may show: its key, then its second line in any state. */
function nodeTexts(n) {
  const row = ui.detail?.nodes.find((x) => x.node_key === n.key);
  const tail = [n.executor_key ?? n.action_type, row?.error_code].filter(Boolean);
  return [n.key, `${LONGEST_NODE_STATE} - needs a person`, ...tail.map((t) => `${LONGEST_NODE_STATE} - ${t}`), ...tail.map((t) => `not created yet - ${t}`)];
}

function drawDag(plan, at) {
  const svg = $('dag');
  svg.replaceChildren(arrowDefs('dag-arrow', 'arrow'));
  const layout = layoutPlan(plan, nodeTexts);
  const pos = layout.pos;
  setSize(svg, layout.width, layout.height);
  for (const e of plan.edges) {
    const a = pos.get(e.from);
    const b = pos.get(e.to);
    if (!a || !b) continue;
    const x1 = a.x + a.w;
    const y1 = a.y + DAG.h / 2;
    const x2 = b.x - 2;
    const y2 = b.y + DAG.h / 2;
    const mx = (x1 + x2) / 2;
    svg.append(svgEl('path', { class: 'dag-edge', d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, 'marker-end': 'url(#dag-arrow)' }));
  }
  for (const n of plan.nodes) {
    const p = pos.get(n.key);
    const state = at.nodes.get(n.key)?.state ?? null;
    const flagged = needsPerson(n.key, state);
    const g = svgEl('g', {
      class: `dag-node ${state ? `s-${state}` : 'absent'}${ui.selected === n.key ? ' selected' : ''}${flagged ? ' attention' : ''}`,
      'data-key': n.key,
      'data-state': state ?? '',
      'data-attention': flagged ? 'true' : '',
      transform: `translate(${p.x},${p.y})`,
    });
    g.append(
      svgEl('rect', { width: p.w, height: DAG.h, rx: 8 }),
      svgText(DAG.padX, 20, n.key, 'key'),
      svgText(DAG.padX, 38, nodeLine(n, state), 'state'),
      svgEl('title', {}, `${n.key} (${n.kind}, ${n.action_type})`),
    );
    g.addEventListener('click', () => {
      ui.selected = n.key;
      render();
    });
    svg.append(g);
  }
}

// ------------------------------------------------------------------------------------------------
// Machine diagram (laid out by layout.js: states in columns ordered to keep crossings down, every
// label where it covers no state and no other label)

/** A label's text lines, one event a line, inside its box. */
function labelText(label, lines, cls) {
  const text = svgEl('text', { class: cls, x: label.x, y: label.y });
  lines.forEach((line, i) => text.append(svgEl('tspan', { x: label.x, y: label.y + (i + 1) * LINE - 3 }, line)));
  return text;
}

function drawSelectedMachine(at) {
  const d = ui.detail;
  const isMovement = ui.selected === MOVEMENT;
  const node = isMovement ? null : d.nodes.find((n) => n.node_key === ui.selected);
  const machineId = isMovement ? d.movement.machine_id : node?.machine_id;
  const m = ui.machines.get(machineId);
  const svg = $('machine');
  svg.replaceChildren(arrowDefs('m-arrow', 'm-arrow'), arrowDefs('m-arrow-taken', 'm-arrow-taken'));
  if (!m) {
    $('machine-title').textContent = `Machine ${machineId ?? ''} (not described by this Ferry)`;
    return;
  }
  const entity = isMovement ? at.movement : at.nodes.get(ui.selected) ?? { state: null, last: null };
  const visited = isMovement ? at.visited.movement : at.visited.nodes.get(ui.selected) ?? new Set();
  $('machine-title').textContent = `${isMovement ? 'Movement' : `Node ${ui.selected}`} - machine ${m.view.id} v${m.view.version}`;
  $('machine-title').title = 'The current state is highlighted; darker arrows are the events it accepts, the blue one the last transition taken.';
  svg.dataset.machine = m.view.id;
  svg.dataset.current = entity.state ?? '';
  setSize(svg, m.layout.width, m.layout.height);

  const taken = entity.last && entity.last.from_state ? `${entity.last.from_state}->${entity.last.to_state}` : null;
  const labels = [];
  for (const p of m.layout.pairs) {
    const cls = p.id === taken ? 'taken' : p.source === entity.state ? 'next' : '';
    svg.append(svgEl('path', { class: `m-edge ${cls}`, d: p.d, 'data-edge': p.id, 'marker-end': `url(#${cls === 'taken' ? 'm-arrow-taken' : 'm-arrow'})` }, svgEl('title', {}, `${p.source} -> ${p.target}: ${p.events.join(', ')}`)));
    const lines = cls === 'taken' ? [entity.last.event_type] : p.label.lines;
    labels.push(labelText(p.label, lines, `m-label ${cls}`));
  }
  for (const s of m.view.states) {
    const p = m.layout.pos.get(s.key);
    const current = s.key === entity.state;
    const g = svgEl('g', {
      class: `m-state${s.final ? ' final' : ''}${visited.has(s.key) ? ' visited' : ''}${current ? ` current s-${s.key}` : ''}`,
      'data-state': s.key,
      transform: `translate(${p.x},${p.y})`,
    });
    g.append(svgEl('rect', { width: p.w, height: p.h, rx: s.final ? 14 : 6 }), svgText(p.w / 2, 19, s.key, '', 'middle'));
    svg.append(g);
  }
  svg.append(...labels); // above the states, so the highlighted labels stay readable
}

// ------------------------------------------------------------------------------------------------
// Timeline and log

function describe(t) {
  return t.entity_type === 'request' ? 'movement' : `node ${t.node_key}`;
}

function drawTimeline(k) {
  const n = ui.transitions.length;
  const slider = $('timeline');
  slider.max = String(Math.max(n, 1));
  slider.value = String(Math.max(k, 1));
  slider.disabled = n <= 1;
  $('position-count').textContent = `${k} / ${n}`;
  $('follow-live').disabled = ui.position === null;
  const info = $('position-info');
  const t = ui.transitions[k - 1];
  if (!t) {
    info.replaceChildren();
    return;
  }
  info.dataset.position = String(k);
  info.dataset.event = t.event_type;
  const payload = Object.keys(t.event_payload).length ? el('pre', {}, JSON.stringify(t.event_payload, null, 2)) : '';
  info.replaceChildren(
    el('div', {},
      `Transition ${k}: ${describe(t)} `,
      el('span', { class: `badge s-${t.from_state ?? 'none'}` }, t.from_state ?? 'created'),
      ' -> ',
      el('span', { class: `badge s-${t.to_state}` }, t.to_state),
      ' on ', el('span', { class: 'event' }, t.event_type),
      ` by ${t.actor_name ?? t.actor} at ${formatTime(t.at)}`),
    payload,
  );
}

const LOG_WINDOW = 150;

function drawLog(k) {
  const body = $('log').tBodies[0];
  body.replaceChildren();
  const from = Math.max(0, k - LOG_WINDOW);
  const to = Math.min(ui.transitions.length, k + LOG_WINDOW);
  let current = null;
  for (let i = from; i < to; i++) {
    const t = ui.transitions[i];
    const tr = el('tr', { class: i === k - 1 ? 'current' : i >= k ? 'future' : '' },
      el('td', {}, String(i + 1)), el('td', {}, formatTime(t.at)), el('td', {}, describe(t)),
      el('td', {}, t.from_state ?? '-'), el('td', {}, t.to_state), el('td', { class: 'event' }, t.event_type), el('td', { title: t.actor }, t.actor_name ?? t.actor));
    tr.addEventListener('click', () => travel(i + 1));
    if (i === k - 1) current = tr;
    body.append(tr);
  }
  current?.scrollIntoView({ block: 'nearest' });
}

function travel(k) {
  ui.position = k >= ui.transitions.length ? null : k;
  render();
}

function formatTime(iso) {
  const d = new Date(iso);
  return `${d.toLocaleTimeString([], { hour12: false })}.${String(d.getMilliseconds()).padStart(3, '0')}`;
}

// ------------------------------------------------------------------------------------------------
// Manual intervention: a movement in MANUAL_INTERVENTION waits for a person to settle a node (complete
// with the provider's reference, fail, or retry). One operator proposes, a second one confirms
// (POST /v3/movements/{id}/resolutions, .../{resolution_id}/confirm); Ferry refuses the proposer.

const SETTLEABLE = ['UNKNOWN', 'FAILED'];

/** Whether the executor said this node needs a person, and the node is still where it said so. */
function needsPerson(key, liveState) {
  const n = ui.detail?.nodes.find((x) => x.node_key === key);
  return Boolean(n?.manual_intervention_required && (liveState ?? n.state) === n.state);
}

async function refreshResolutions(id) {
  const { resolutions } = await api(`/v3/movements/${id}/resolutions`);
  if (ui.movementId !== id) return;
  ui.resolutions = resolutions;
  scheduleRender();
}

/**
 * A movement transition arrived. Entering MANUAL_INTERVENTION: the nodes' flags are read again (the
 * log says which state a node is in, not whether its executor asked for a person). Any movement
 * transition may have applied a resolution, so those are read again too.
 */
function onMovementMoved(t) {
  const id = ui.movementId;
  if (t.to_state === 'MANUAL_INTERVENTION') {
    void api(`/inspect/movements/${id}`).then((detail) => {
      if (ui.movementId !== id || !ui.detail) return;
      ui.detail.nodes = detail.nodes;
      scheduleRender();
    }).catch(() => {});
  }
  void refreshResolutions(id).catch(() => {});
}

function drawAttention(live) {
  const d = ui.detail;
  const movementState = live.movement.state ?? d.movement.state;
  const waiting = movementState === 'MANUAL_INTERVENTION';
  const waitingNodes = d.nodes
    .map((n) => ({ n, state: live.nodes.get(n.node_key)?.state ?? n.state }))
    .filter(({ n, state }) => needsPerson(n.node_key, state) || (waiting && SETTLEABLE.includes(state)));
  const panel = $('attention');
  panel.hidden = !waiting && waitingNodes.length === 0;
  panel.dataset.state = movementState;
  $('attention-note').textContent = waiting
    ? '- the movement waits in MANUAL_INTERVENTION until a node is settled'
    : `- the movement is ${movementState}`;
  $('attention-nodes').replaceChildren(...waitingNodes.map(({ n, state }) =>
    el('li', { 'data-key': n.node_key, 'data-state': state },
      el('b', {}, n.node_key), ' ', el('span', { class: `badge s-${state}` }, state),
      needsPerson(n.node_key, state) ? el('span', { class: 'flag' }, 'manual intervention required') : '',
      n.error_code ? el('span', { class: 'why' }, `${n.error_code}${n.error_detail ? `: ${n.error_detail}` : ''}`) : '')));

  // The form settles nodes of a waiting movement; its choices survive redraws.
  $('resolution-form').hidden = !waiting;
  const select = $('resolution-node');
  const keys = waitingNodes.filter(({ state }) => SETTLEABLE.includes(state)).map(({ n }) => n.node_key);
  if ([...select.options].map((o) => o.value).join() !== keys.join()) {
    const chosen = select.value;
    select.replaceChildren(...keys.map((k) => el('option', { value: k }, k)));
    if (keys.includes(chosen)) select.value = chosen;
  }
  $('resolution-ref-label').hidden = $('resolution-kind').value !== 'complete';
  drawResolutions();
}

function drawResolutions() {
  $('resolutions-panel').hidden = ui.resolutions.length === 0;
  const body = $('resolutions').tBodies[0];
  body.replaceChildren();
  for (const r of ui.resolutions) {
    const confirm = r.status === 'proposed' ? el('button', { type: 'button', class: 'confirm' }, 'Confirm') : '';
    if (confirm) confirm.addEventListener('click', () => void confirmResolution(r.id));
    body.append(el('tr', { 'data-id': r.id, 'data-status': r.status, class: r.status === 'proposed' ? 'open' : '' },
      el('td', {}, `${r.node_key} (attempt ${r.attempt_no})`),
      el('td', {}, r.resolution, r.provider_ref ? el('div', { class: 'hint' }, `ref ${r.provider_ref}`) : ''),
      el('td', { class: 'reason' }, r.reason),
      el('td', { title: r.refusal ?? '' }, el('span', { class: `badge r-${r.status}` }, r.status)),
      el('td', { class: 'proposer', title: r.proposed_by }, r.proposed_by_name ?? r.proposed_by, el('div', { class: 'hint' }, formatTime(r.proposed_at))),
      el('td', { title: r.confirmed_by ?? '' }, r.confirmed_by ? (r.confirmed_by_name ?? r.confirmed_by) : ''),
      el('td', {}, confirm)));
  }
}

async function proposeResolution() {
  const id = ui.movementId;
  clearError('resolution-error');
  const body = { node_key: $('resolution-node').value, resolution: $('resolution-kind').value, reason: $('resolution-reason').value.trim() };
  if (body.resolution === 'complete' && $('resolution-ref').value.trim()) body.provider_ref = $('resolution-ref').value.trim();
  try {
    await api(`/v3/movements/${id}/resolutions`, body);
    $('resolution-reason').value = '';
    $('resolution-ref').value = '';
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    showError('resolution-error', err);
  }
  await refreshResolutions(id).catch(() => {});
}

async function confirmResolution(resolutionId) {
  const id = ui.movementId;
  clearError('resolution-error');
  try {
    await api(`/v3/movements/${id}/resolutions/${resolutionId}/confirm`, {});
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    showError('resolution-error', err);
  }
  await refreshResolutions(id).catch(() => {});
}

// ------------------------------------------------------------------------------------------------
// Manual gates: a READY gate node waits for a person other than the movement's requester, who
// confirms it with a note or skips it with a reason (POST /v3/movements/{id}/gates/{node_key}/confirm,
// .../skip). Who may is Ferry's to say: its refusal (FOUR_EYES_VIOLATION) is shown.

const isGate = (n) => n.node_kind === 'manual_gate' || String(n.action_type ?? '').startsWith('manual_');

function drawGates(live) {
  const d = ui.detail;
  const ready = d.nodes.filter((n) => isGate(n) && (live.nodes.get(n.node_key)?.state ?? n.state) === 'READY').map((n) => n.node_key);
  const movementState = live.movement.state ?? d.movement.state;
  const panel = $('gates');
  panel.hidden = ready.length === 0;
  panel.dataset.state = movementState;
  $('gates-note').textContent = `- the movement is ${movementState}`;
  const select = $('gate-node');
  if ([...select.options].map((o) => o.value).join() !== ready.join()) {
    const chosen = select.value;
    select.replaceChildren(...ready.map((k) => el('option', { value: k }, k)));
    if (ready.includes(chosen)) select.value = chosen;
  }
}

async function operateGate(op) {
  const id = ui.movementId;
  clearError('gate-error');
  const key = $('gate-node').value;
  const text = $('gate-note').value.trim();
  if (!key || !text) {
    showError('gate-error', new Error(op === 'confirm' ? 'write what you checked in the note' : 'write why the gate is skipped in the note'));
    return;
  }
  try {
    await api(`/v3/movements/${id}/gates/${encodeURIComponent(key)}/${op}`, op === 'confirm' ? { note: text } : { reason: text });
    $('gate-note').value = '';
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    showError('gate-error', err);
  }
}

// ------------------------------------------------------------------------------------------------
// Template proposals (GET /v3/template-proposals, .../{id}; POST .../approve, challenge, withdraw)

const PROPOSAL_STATES = ['PROPOSED', 'APPROVED', 'FINALIZED', 'CHALLENGED', 'EXPIRED', 'WITHDRAWN'];

function showView(view) {
  ui.view = view;
  $('movements-side').hidden = view !== 'movements';
  $('proposals-side').hidden = view !== 'proposals';
  $('standing-orders-side').hidden = view !== 'standing-orders';
  $('workers-side').hidden = view !== 'workers';
  $('workers').hidden = view !== 'workers';
  $('policy-side').hidden = view !== 'policy';
  $('view-policy').classList.toggle('current', view === 'policy');
  if (view !== 'policy') showPolicyView('none');
  $('view-movements').classList.toggle('current', view === 'movements');
  $('view-proposals').classList.toggle('current', view === 'proposals');
  $('view-standing-orders').classList.toggle('current', view === 'standing-orders');
  $('view-workers').classList.toggle('current', view === 'workers');
  if (view !== 'movements') {
    $('empty').hidden = true;
    $('movement').hidden = true;
  }
  if (view !== 'proposals') {
    $('proposals-empty').hidden = true;
    $('proposal').hidden = true;
  }
  if (view !== 'standing-orders') {
    $('standing-orders-empty').hidden = true;
    $('standing-order').hidden = true;
    $('standing-order-new').hidden = true;
  }
}

function formatWhen(iso) {
  return iso ? new Date(iso).toLocaleString() : '-';
}

/** What the proposal waits for, or how it ended. */
function proposalWindow(p) {
  switch (p.state) {
    case 'PROPOSED': return `waits for approval until ${formatWhen(p.review_expires_at)}`;
    case 'APPROVED': return `approved by ${p.approved_by_name}; goes live ${formatWhen(p.challenge_ends_at)} unless challenged`;
    case 'FINALIZED': return `live as version ${p.finalized_version}`;
    case 'CHALLENGED': return `challenged by ${p.decided_by_name ?? '-'}${p.reason ? `: ${p.reason}` : ''}`;
    case 'WITHDRAWN': return `withdrawn by ${p.decided_by_name ?? '-'}`;
    case 'EXPIRED': return `expired unapproved at ${formatWhen(p.review_expires_at)}`;
    default: return '';
  }
}

async function refreshProposals() {
  const seq = ++ui.proposalSeq;
  const state = $('proposal-filter').value;
  const { proposals } = await api(`/v3/template-proposals?limit=100${state ? `&state=${state}` : ''}`);
  if (seq !== ui.proposalSeq) return;
  const list = $('proposals');
  list.replaceChildren();
  if (proposals.length === 0) {
    list.append(el('li', { class: 'none' }, state ? `No proposal is ${state}.` : 'No template proposals yet.'));
    return;
  }
  for (const p of proposals) {
    const li = el('li', { 'data-id': p.id, 'data-state': p.state, class: p.id === ui.proposalId ? 'selected' : '' },
      el('div', { class: 'row' }, el('b', {}, p.template_key), el('span', { class: `badge s-${p.state}`, 'data-state': p.state }, p.state)),
      el('div', { class: 'who' }, `proposed by ${p.proposed_by_name}${p.system ? ' (system)' : ''}`),
      el('div', { class: 'nodes' }, proposalWindow(p)));
    li.addEventListener('click', () => { location.hash = `#/proposals/${p.id}`; });
    list.append(li);
  }
}

function closeProposal() {
  ui.proposalId = null;
  ui.proposal = null;
  $('proposal').hidden = true;
  $('proposals-empty').hidden = false;
}

/** Opens (or, quietly, re-reads) a proposal. */
async function openProposal(id, quiet = false) {
  if (ui.proposalId !== id) {
    clearError('proposal-error');
    $('challenge-reason').value = '';
  }
  ui.proposalId = id;
  let detail;
  try {
    detail = await api(`/v3/template-proposals/${id}`);
  } catch (err) {
    if (err instanceof Unauthenticated || quiet) return;
    $('proposal').hidden = true;
    $('proposals-empty').hidden = false;
    $('proposals-empty').querySelector('p').textContent = `Cannot show proposal ${id}: ${err.message}`;
    return;
  }
  if (ui.proposalId !== id || ui.view !== 'proposals') return;
  ui.proposal = detail;
  $('proposals-empty').hidden = true;
  $('proposal').hidden = false;
  for (const li of $('proposals').children) li.classList.toggle('selected', li.dataset.id === id);
  drawProposal(detail);
}

function drawProposal(d) {
  const p = d.proposal;
  $('proposal-title').textContent = `${p.template_key} - proposed change`;
  $('proposal-meta').textContent = `${p.id} - proposed by ${p.proposed_by_name} on ${formatWhen(p.created_at)}` +
    ` - based on version ${p.base_version ?? 'none'} - graph ${p.graph_hash.slice(0, 18)}...`;
  $('proposal-windows').textContent = proposalWindow(p);
  const badge = $('proposal-state');
  badge.textContent = p.state;
  badge.className = `badge s-${p.state}`;
  badge.dataset.state = p.state;
  // The buttons follow the machine; who may press them is Ferry's to say (its refusal is shown).
  $('proposal-approve').disabled = p.state !== 'PROPOSED';
  $('proposal-withdraw').disabled = p.state !== 'PROPOSED' && p.state !== 'APPROVED';
  $('proposal-challenge').disabled = p.state !== 'APPROVED';
  $('challenge-reason').disabled = p.state !== 'APPROVED';
  drawDiff(d);
  $('replay-note').textContent = d.replay.ok ? `- the history replays to ${d.replay.state}` : `- the history does not replay: ${d.replay.reason}`;
  const body = $('proposal-history').tBodies[0];
  body.replaceChildren(...d.history.map((t) => el('tr', { 'data-event': t.event },
    el('td', {}, String(t.seq)), el('td', {}, formatWhen(t.at)), el('td', {}, t.from || '-'), el('td', {}, t.to),
    el('td', { class: 'event' }, t.event === 'xstate.init' ? 'created' : t.event), el('td', { class: 'actor', title: t.actor }, t.actor_name ?? t.actor),
    el('td', {}, typeof t.payload?.reason === 'string' ? t.payload.reason : ''))));
}

const json = (v) => (typeof v === 'string' ? v : JSON.stringify(v));

function drawDiff(d) {
  const diff = d.diff;
  $('diff-note').textContent = d.live_version === null ? '- no version is live yet: everything is new' : `- against live version ${d.live_version}`;
  const nodeOf = (key) => (d.definition.nodes ?? []).find((n) => n.node_key === key);
  const group = (kind, title, items) => (items.length === 0 ? '' : el('div', { class: `diff-group ${kind.split('-')[1]}`, 'data-kind': kind },
    el('h4', {}, title), el('ul', {}, ...items)));
  const edge = (sign) => (e) => el('li', { 'data-edge': `${e.from}->${e.to}` }, `${sign} ${e.from} -> ${e.to}`);
  const groups = [
    group('nodes-added', 'Nodes added', diff.nodes.added.map((k) => {
      const n = nodeOf(k);
      return el('li', { 'data-key': k }, `+ ${k}`, n ? el('span', { class: 'hint' }, ` ${n.action_type} on ${n.executor_binding}`) : '');
    })),
    group('nodes-removed', 'Nodes removed', diff.nodes.removed.map((k) => el('li', { 'data-key': k }, `- ${k}`))),
    group('nodes-changed', 'Nodes changed', diff.nodes.changed.map((c) => el('li', { 'data-key': c.node_key }, `~ ${c.node_key}`,
      el('ul', {}, ...c.fields.map((f) => el('li', { 'data-field': f.field },
        el('code', {}, f.field), ' ', el('span', { class: 'from' }, json(f.from)), ' -> ', el('span', { class: 'to' }, json(f.to)))))))),
    group('edges-added', 'Edges added', diff.edges.added.map(edge('+'))),
    group('edges-removed', 'Edges removed', diff.edges.removed.map(edge('-'))),
    diff.description ? group('description-changed', 'Description', [el('li', {}, el('span', { class: 'from' }, diff.description.from || '(none)'), ' -> ', el('span', { class: 'to' }, diff.description.to))]) : '',
    diff.risk_controls ? group('risk-changed', 'Risk controls', [el('li', {}, el('span', { class: 'from' }, json(diff.risk_controls.from)), ' -> ', el('span', { class: 'to' }, json(diff.risk_controls.to)))]) : '',
  ].filter((g) => g !== '');
  $('proposal-diff').replaceChildren(...(groups.length ? groups : [el('p', { class: 'hint' }, 'The graph is the same as the live version.')]));
}

async function proposalAction(action, body) {
  const id = ui.proposalId;
  clearError('proposal-error');
  try {
    await api(`/v3/template-proposals/${id}/${action}`, body);
    if (action === 'challenge') $('challenge-reason').value = '';
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    showError('proposal-error', err);
  }
  await Promise.all([openProposal(id, true), refreshProposals()]).catch(() => {});
}

// ------------------------------------------------------------------------------------------------
// Standing orders (GET /v3/standing-orders, .../{id} with its runs and history; POST .../approve, reject,
// pause, resume, revoke). Who may press a button is Ferry's to say: its refusal is shown with its code.

const STANDING_ORDER_STATES = ['PROPOSED', 'ACTIVE', 'PAUSED', 'REJECTED', 'REVOKED', 'EXPIRED'];

/** What the order runs on, in words. */
function triggerText(t) {
  const schedule = (s) => (s ? `${s.cron}${s.time_zone ? ` (${s.time_zone})` : ''}` : '');
  const balance = (b) => `${b.asset} of ${b.wallet} on ${b.chain}`;
  switch (t.kind) {
    case 'schedule': return `runs at ${schedule(t.schedule)}, moving ${t.amount ?? '-'} each time`;
    case 'ceiling': return `sweeps ${balance(t.balance)} above ${t.ceiling} down to ${t.target ?? t.ceiling}${t.schedule ? `, at ${schedule(t.schedule)}` : ', once per crossing'}`;
    case 'floor': return `tops up ${balance(t.balance)} below ${t.floor} to ${t.target}${t.schedule ? `, at ${schedule(t.schedule)}` : ', once per crossing'}`;
    default: return JSON.stringify(t);
  }
}

async function refreshStandingOrders() {
  const seq = ++ui.standingOrderSeq;
  const state = $('standing-order-filter').value;
  const { standing_orders: orders } = await api(`/v3/standing-orders?limit=100${state ? `&state=${state}` : ''}`);
  if (seq !== ui.standingOrderSeq) return;
  const list = $('standing-orders');
  list.replaceChildren();
  if (orders.length === 0) {
    list.append(el('li', { class: 'none' }, state ? `No standing order is ${state}.` : 'No standing orders yet.'));
    return;
  }
  for (const o of orders) {
    const li = el('li', { 'data-id': o.id, 'data-name': o.name, 'data-state': o.state, class: o.id === ui.standingOrderId ? 'selected' : '' },
      el('div', { class: 'row' }, el('b', {}, o.name), el('span', { class: `badge s-${o.state}`, 'data-state': o.state }, o.state)),
      el('div', { class: 'who' }, `${o.template_key} - ${o.asset} to ${o.destinations.join(', ')}`),
      el('div', { class: 'nodes' }, triggerText(o.trigger)));
    li.addEventListener('click', () => { location.hash = `#/standing-orders/${o.id}`; });
    list.append(li);
  }
}

function closeStandingOrder() {
  ui.standingOrderId = null;
  ui.standingOrder = null;
  $('standing-order').hidden = true;
  $('standing-order-new').hidden = true;
  $('standing-orders-empty').hidden = false;
}

/** Opens (or, quietly, re-reads) a standing order. */
async function openStandingOrder(id, quiet = false) {
  if (ui.standingOrderId !== id) {
    clearError('standing-order-error');
    $('standing-order-reason').value = '';
  }
  ui.standingOrderId = id;
  let detail;
  try {
    detail = await api(`/v3/standing-orders/${id}`);
  } catch (err) {
    if (err instanceof Unauthenticated || quiet) return;
    $('standing-order').hidden = true;
    $('standing-orders-empty').hidden = false;
    $('standing-orders-empty').querySelector('p').textContent = `Cannot show standing order ${id}: ${err.message}`;
    return;
  }
  if (ui.standingOrderId !== id || ui.view !== 'standing-orders') return;
  ui.standingOrder = detail;
  $('standing-orders-empty').hidden = true;
  $('standing-order-new').hidden = true;
  $('standing-order').hidden = false;
  for (const li of $('standing-orders').children) li.classList.toggle('selected', li.dataset.id === id);
  drawStandingOrder(detail);
}

function drawStandingOrder(d) {
  const o = d.standing_order;
  $('standing-order-title').textContent = `${o.name} - standing order`;
  $('standing-order-meta').textContent = `${o.id} - ${o.template_key} - proposed by ${o.proposed_by_name ?? o.proposed_by} on ${formatWhen(o.created_at)} - expires ${formatWhen(o.expires_at)}`;
  $('standing-order-bounds').textContent = `${o.asset} to ${o.destinations.join(', ')} - at most ${o.max_per_run} per run and ${o.max_per_window} per ${o.window_seconds} s`;
  $('standing-order-trigger').textContent = triggerText(o.trigger);
  const approvedBy = o.approvals.map((a) => a.by_name ?? a.by);
  $('standing-order-approvals').textContent = `approvals ${o.approvals.length} of ${o.required_approvals}${approvedBy.length ? ` (${approvedBy.join(', ')})` : ''}` +
    `${o.reason ? ` - ${o.state === 'PAUSED' ? 'paused' : 'reason'}: ${o.reason}` : ''}`;
  const badge = $('standing-order-state');
  badge.textContent = o.state;
  badge.className = `badge s-${o.state}`;
  badge.dataset.state = o.state;
  // The buttons follow the machine; who may press them is Ferry's to say.
  $('standing-order-approve').disabled = o.state !== 'PROPOSED';
  $('standing-order-pause').disabled = o.state !== 'ACTIVE';
  $('standing-order-resume').disabled = o.state !== 'PAUSED';
  $('standing-order-reject').disabled = o.state !== 'PROPOSED';
  $('standing-order-revoke').disabled = o.state !== 'ACTIVE' && o.state !== 'PAUSED';
  $('standing-order-reason').disabled = $('standing-order-reject').disabled && $('standing-order-revoke').disabled;
  $('standing-order-runs-note').textContent = d.runs.length ? `- ${d.runs.length} newest first` : '- none yet';
  $('standing-order-runs').tBodies[0].replaceChildren(...d.runs.map((r) => {
    const movement = r.movement_id ? el('a', { href: `#/movements/${r.movement_id}` }, r.movement_id.slice(0, 8)) : '-';
    return el('tr', { 'data-id': r.id, 'data-outcome': r.outcome, 'data-slot': r.slot_key },
      el('td', { class: 'event' }, r.slot_key), el('td', {}, formatWhen(r.created_at)), el('td', { class: 'amount' }, r.amount ?? '-'),
      el('td', {}, r.destination_entry ?? '-'), el('td', {}, el('span', { class: `badge o-${r.outcome}` }, r.outcome)),
      el('td', { class: 'reason', title: r.error_detail ?? '' }, r.error_code ?? ''), el('td', {}, movement));
  }));
  $('standing-order-history').tBodies[0].replaceChildren(...d.history.map((t) => el('tr', { 'data-event': t.event },
    el('td', {}, String(t.seq)), el('td', {}, formatWhen(t.at)), el('td', {}, t.from || '-'), el('td', {}, t.to),
    el('td', { class: 'event' }, t.event === 'xstate.init' ? 'created' : t.event), el('td', { class: 'actor' }, t.actor))));
}

async function standingOrderAction(action) {
  const id = ui.standingOrderId;
  if (!id) return;
  clearError('standing-order-error');
  let body = {};
  if (action === 'reject' || action === 'revoke') {
    const reason = $('standing-order-reason').value.trim();
    if (!reason) {
      showError('standing-order-error', new Error(`write why it is ${action === 'reject' ? 'rejected' : 'revoked'} in the reason`));
      return;
    }
    body = { reason };
  }
  try {
    await api(`/v3/standing-orders/${id}/${action}`, body);
    if (body.reason) $('standing-order-reason').value = '';
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    showError('standing-order-error', err);
  }
  await Promise.all([openStandingOrder(id, true), refreshStandingOrders()]).catch(() => {});
}

// Proposing a standing order (POST /v3/standing-orders): the form sends the fields that route takes,
// as typed; what is wrong with them (a bad cron, a maximum the policy blocks, a destination not in
// the book) is Ferry's to say, shown with its code. The template and the destinations are chosen
// from what Ferry lists (GET /v3/templates, /v3/policy/address-book).

const propose = { destinations: [] }; // the ticked book entries, in the order they were ticked

function resetProposeForm() {
  $('standing-order-form').reset();
  $('so-template').replaceChildren();
  $('so-destinations').replaceChildren();
  propose.destinations = [];
  drawDestinationOrder();
  drawTriggerFields();
}

async function openProposeForm() {
  ui.standingOrderId = null;
  ui.standingOrder = null;
  for (const li of $('standing-orders').children) li.classList.remove('selected');
  $('standing-order').hidden = true;
  $('standing-orders-empty').hidden = true;
  $('standing-order-new').hidden = false;
  clearError('standing-order-new-error');
  if (!$('so-expires').value) {
    // A month from now, in local time as the input shows it.
    const d = new Date(Date.now() + 30 * 86400_000);
    d.setMinutes(d.getMinutes() - d.getTimezoneOffset(), 0, 0);
    $('so-expires').value = d.toISOString().slice(0, 16);
  }
  drawTriggerFields();
  let templates;
  let entries;
  try {
    [{ templates }, { entries }] = await Promise.all([api('/v3/templates'), api('/v3/policy/address-book')]);
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    showError('standing-order-new-error', err);
    return;
  }
  if (location.hash !== '#/standing-orders/new') return;
  const select = $('so-template');
  const chosen = select.value;
  select.replaceChildren(...templates.map((t) => el('option', { value: t.template_key }, `${t.template_key} (v${t.latest_version})`)));
  if (templates.some((t) => t.template_key === chosen)) select.value = chosen;
  propose.destinations = propose.destinations.filter((n) => entries.some((e) => e.name === n));
  $('so-destinations').replaceChildren(...(entries.length === 0
    ? [el('span', { class: 'hint' }, 'The address book is empty: an entry is proposed and approved under Policy first.')]
    : entries.map((e) => {
      const box = el('input', { type: 'checkbox', value: e.name, 'data-name': e.name });
      box.checked = propose.destinations.includes(e.name);
      box.addEventListener('change', () => {
        propose.destinations = propose.destinations.filter((n) => n !== e.name);
        if (box.checked) propose.destinations.push(e.name);
        drawDestinationOrder();
      });
      return el('label', { title: `${e.network} ${e.address}${e.tag ? ` (tag ${e.tag})` : ''} - ${e.owner}, ${e.kind}` }, box, `${e.name}`,
        el('span', { class: 'hint' }, ` ${e.network} ${shortAddress(e.address)}`));
    })));
  drawDestinationOrder();
}

function drawDestinationOrder() {
  $('so-destination-order').textContent = propose.destinations.length ? `runs go to ${propose.destinations.join(', then ')}` : 'none ticked';
}

/** Shows the fields of the chosen trigger kind. */
function drawTriggerFields() {
  const kind = $('so-trigger-kind').value;
  $('so-balance-fields').hidden = kind === 'schedule';
  $('so-amount-label').hidden = kind !== 'schedule';
  $('so-threshold-label').hidden = kind === 'schedule';
  $('so-threshold-name').textContent = kind === 'floor' ? 'Floor' : 'Ceiling';
  $('so-target-label').hidden = kind === 'schedule';
  $('so-target').placeholder = kind === 'ceiling' ? 'the ceiling' : '';
  $('so-cron-hint').textContent = kind === 'schedule' ? '(five cron fields)' : '(optional; without it: once per crossing)';
}

/** The body of POST /v3/standing-orders from the form, or throws (an Error without a code) what is not JSON. */
function proposalBody() {
  const text = (id) => $(id).value.trim();
  const schedule = text('so-cron') ? { cron: text('so-cron'), ...(text('so-time-zone') ? { time_zone: text('so-time-zone') } : {}) } : undefined;
  const kind = $('so-trigger-kind').value;
  let trigger;
  if (kind === 'schedule') trigger = { kind, schedule, amount: text('so-amount') };
  else {
    trigger = { kind, balance: { chain: text('so-balance-chain'), wallet: text('so-balance-wallet'), asset: text('so-balance-asset') }, [kind]: text('so-threshold') };
    if (text('so-target') || kind === 'floor') trigger.target = text('so-target');
    if (schedule) trigger.schedule = schedule;
  }
  let intent = {};
  if (text('so-intent')) {
    try {
      intent = JSON.parse(text('so-intent'));
    } catch {
      throw new Error('the fixed intent fields are not JSON (an object such as {"memo": "sweep"})');
    }
  }
  const expires = $('so-expires').value ? new Date($('so-expires').value) : null;
  return {
    name: text('so-name'),
    template_key: $('so-template').value,
    intent,
    asset: text('so-asset'),
    destinations: [...propose.destinations],
    max_per_run: text('so-max-run'),
    max_per_window: text('so-max-window'),
    window_seconds: Number(text('so-window')),
    trigger,
    expires_at: expires && !Number.isNaN(expires.getTime()) ? expires.toISOString() : '',
  };
}

async function proposeStandingOrder() {
  clearError('standing-order-new-error');
  let body;
  try {
    body = proposalBody();
  } catch (err) {
    showError('standing-order-new-error', err);
    return;
  }
  $('so-submit').disabled = true;
  try {
    const order = await api('/v3/standing-orders', body);
    resetProposeForm();
    location.hash = `#/standing-orders/${order.id}`;
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    showError('standing-order-new-error', err);
  } finally {
    $('so-submit').disabled = false;
  }
}

// ------------------------------------------------------------------------------------------------
// Workers (GET /v3/workers): per process its state and heartbeat age, its core and sidecar groups
// (expected against running, the others named with their status), its live movement actors and its
// leases; then every sweep's last run and next due time. Read by the page's poll while the view is
// on show (refreshCurrent), never once it is left or the user signed out. Everything is set as text.

function clearWorkers() {
  $('worker-processes').tBodies[0].replaceChildren();
  $('sweeps').tBodies[0].replaceChildren();
  for (const id of ['workers-meta', 'workers-note', 'workers-hidden', 'sweeps-note']) $(id).textContent = '';
}

async function refreshWorkers() {
  const seq = ++ui.workersSeq;
  const cls = $('workers-class').value;
  let answer;
  try {
    answer = await api(cls ? `/v3/workers?network_class=${encodeURIComponent(cls)}` : '/v3/workers');
  } catch (err) {
    if (err instanceof Unauthenticated) throw err;
    if (seq === ui.workersSeq && ui.view === 'workers') showError('workers-error', err);
    return;
  }
  if (seq !== ui.workersSeq || ui.view !== 'workers') return;
  clearError('workers-error');
  ui.workers = answer;
  drawWorkers();
}

/** 42 s, 3 min, 5 h, 2 d: how long ago, as a person reads it. */
function ageText(seconds) {
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 172800) return `${Math.floor(seconds / 3600)} h`;
  return `${Math.floor(seconds / 86400)} d`;
}

function drawWorkers() {
  const { processes, workers: rows, sweeps } = ui.workers;
  const all = $('workers-all').checked;
  const shown = all ? processes : processes.filter((p) => p.state === 'alive');
  const hidden = processes.length - shown.length;
  const alive = processes.filter((p) => p.state === 'alive').length;
  $('workers-meta').textContent = `${alive} alive of ${processes.length} processes${$('workers-class').value === 'all' ? ' in every network class' : ''} - read ${new Date().toLocaleTimeString()}`;
  $('workers-note').textContent = `- ${shown.length}`;
  $('workers-hidden').textContent = hidden ? `${hidden} stopped or gone ${hidden === 1 ? 'process' : 'processes'} not shown` : '';
  const statusOf = new Map(rows.map((w) => [`${w.process_id} ${w.worker_name}`, w.status]));
  const body = $('worker-processes').tBodies[0];
  body.replaceChildren(...(shown.length === 0
    ? [el('tr', { class: 'none' }, el('td', { colspan: '9' }, processes.length ? 'No process is alive: tick the box to see the stopped and gone ones.' : 'No process with workers has reported yet (is one running?).'))]
    : shown.map((p) => {
      const group = (name) => {
        const g = p.groups[name];
        // A stopped or gone process's rows say what they said last: its state is the word for them.
        const names = g.not_running.map((w) => {
          const status = p.state === 'alive' ? (statusOf.get(`${p.process_id} ${w}`) ?? 'missing') : p.state;
          return el('span', { class: `not-running w-${status}`, 'data-worker': w, 'data-status': status, title: `${w}: ${status}` }, `${w} (${status})`);
        });
        return el('td', { class: `group g-${name}`, 'data-expected': String(g.expected), 'data-running': String(g.running) },
          el('span', { class: 'count' }, `${g.running}/${g.expected} running`), ...names);
      };
      const actors = p.live_actors === null ? '-' : String(p.live_actors);
      return el('tr', { 'data-process-id': p.process_id, 'data-state': p.state, title: `started ${formatWhen(p.started_at)}, last heartbeat ${formatWhen(p.last_beat_at)}` },
        el('td', { class: 'event' }, p.process_id),
        el('td', {}, p.hostname),
        el('td', {}, String(p.pid)),
        el('td', {}, p.network_class),
        el('td', { class: 'state', 'data-age': String(p.last_beat_age_seconds) },
          el('span', { class: `badge p-${p.state}`, 'data-state': p.state }, p.state), el('div', { class: 'age' }, ` beat ${ageText(p.last_beat_age_seconds)} ago`)),
        group('core'),
        group('sidecar'),
        el('td', { class: 'amount actors', 'data-actors': actors }, actors),
        el('td', { class: 'leases', 'data-live': String(p.leases.live), 'data-expired': String(p.leases.expired) },
          `${p.leases.live} live`, p.leases.expired ? el('span', { class: 'expired' }, `, ${p.leases.expired} expired`) : ', 0 expired'));
    })));

  $('sweeps-note').textContent = `- ${sweeps.length}`;
  $('sweeps').tBodies[0].replaceChildren(...sweeps.map((w) => {
    const last = w.last_run;
    const when = last ? `${formatWhen(last.finished_at ?? last.started_at)}${last.duration_ms === null ? '' : ` (${last.duration_ms} ms)`}` : 'never';
    const outcome = last ? last.outcome : 'none';
    const every = w.timing === 'cron' && w.schedule ? `${w.schedule.cron} (${w.schedule.timezone})` : `every ${w.interval_seconds} s`;
    return el('tr', { 'data-name': w.name, 'data-outcome': outcome, title: w.summary },
      el('td', { class: 'event' }, w.name),
      el('td', {}, w.enabled ? 'yes' : 'no'),
      el('td', {}, every),
      el('td', { class: 'last-run' }, when, w.running ? el('span', { class: 'hint' }, ` - running since ${formatWhen(w.running.started_at)}`) : ''),
      el('td', {}, el('span', { class: `badge o-${outcome}` }, outcome), last?.budget_exhausted ? el('span', { class: 'hint' }, ' budget used up') : ''),
      el('td', { class: 'next-due' }, w.enabled ? formatWhen(w.next_due_at) : 'disabled'));
  }));
}

// ------------------------------------------------------------------------------------------------
// Policy (docs/policy.md): the address book and the live rule set (GET /v3/policy/address-book,
// /v3/policy/rules), the policy proposals that change them (GET /v3/policy/proposals, .../{id}; POST
// .../approve, reject, challenge, withdraw, finalize), proposing an entry, a removal or a rule set, and
// trying a movement against the rules (POST /v3/policy/test). Every value Ferry answers is set as
// text. What is wrong with a proposal, and who may press a button, is Ferry's to say: its refusal is
// shown with its code.

const POLICY_PROPOSAL_STATES = ['PROPOSED', 'APPROVED', 'FINALIZED', 'CHALLENGED', 'REJECTED', 'EXPIRED', 'WITHDRAWN'];
const POLICY_BUTTONS = ['approve', 'reject', 'withdraw', 'challenge', 'finalize'];
const ENTRY_FIELDS = ['network', 'address', 'tag', 'owner', 'kind', 'notes'];

const policy = {
  book: [], // the entries last read
  rules: null, // the live rule set last read
  base: null, // { id, book, rules }: what the open proposal is compared with, read when it was opened
};

const kindWord = (k) => (k === 'address_book' ? 'address book' : k === 'rule_set' ? 'rule set' : k);
const orNone = (v) => (v === null || v === undefined || v === '' ? '-' : String(v));
const either = (xs) => xs.join(' or ');

function policyWindow(p) {
  switch (p.state) {
    case 'PROPOSED': return `waits for another principal's approval until ${formatWhen(p.review_expires_at)}`;
    case 'APPROVED': return `approved by ${p.approved_by_name ?? p.approved_by}; live from ${formatWhen(p.challenge_ends_at)} unless challenged`;
    case 'FINALIZED': return `live${p.result_version !== null ? ` as version ${p.result_version}` : ''} since ${formatWhen(p.updated_at)}`;
    case 'CHALLENGED': return `challenged by ${p.decided_by_name ?? '-'}${p.reason ? `: ${p.reason}` : ''}`;
    case 'REJECTED': return `rejected by ${p.decided_by_name ?? '-'}${p.reason ? `: ${p.reason}` : ''}`;
    case 'WITHDRAWN': return `withdrawn by ${p.decided_by_name ?? '-'}`;
    case 'EXPIRED': return `expired unapproved at ${formatWhen(p.review_expires_at)}`;
    default: return '';
  }
}

/** What a proposal changes, in a few words (the list). */
function changeWords(p) {
  const c = p.change ?? {};
  if (c.op === 'put') return `put ${c.entry?.name}: ${c.entry?.kind} ${c.entry?.network} ${shortAddress(String(c.entry?.address ?? ''))}`;
  if (c.op === 'remove') return `remove ${c.name}`;
  if (c.op === 'replace') return `replace version ${c.base_version}: ${c.rules?.length ?? 0} rules, ${c.limits?.length ?? 0} limits`;
  return JSON.stringify(c);
}

function destinationWords(d) {
  const parts = [];
  if (d.in_book === true) parts.push('in the address book');
  if (d.in_book === false) parts.push('not in the address book');
  if (d.kinds) parts.push(`an ${either(d.kinds)} book entry`);
  if (d.entries) parts.push(`book entry ${either(d.entries)}`);
  return parts.join(' and ');
}

/** A rule's match conditions in words. */
function matchWords(m = {}) {
  const parts = [];
  if (m.templates) parts.push(`template ${either(m.templates)}`);
  if (m.lanes) parts.push(`lanes among ${m.lanes.join(', ')}`);
  if (m.assets) parts.push(`asset ${either(m.assets)}`);
  if (m.sources) parts.push(`funds from ${m.sources.join(', ')} only`);
  if (m.destination) parts.push(`destination ${destinationWords(m.destination)}`);
  if (m.amount) {
    const unit = m.amount.currency ? ` ${m.amount.currency}` : '';
    const bounds = [m.amount.at_least !== undefined && `at least ${m.amount.at_least}${unit}`, m.amount.below !== undefined && `below ${m.amount.below}${unit}`].filter(Boolean);
    parts.push(`amount ${bounds.join(' and ')}${m.amount.currency ? ' (valued through its price feed)' : ''}`);
  }
  if (m.requesters) parts.push(`requested by ${either(m.requesters)}`);
  return parts.length ? `if ${parts.join(', ')}` : 'any movement';
}

function actionWords(a) {
  if (a.type === 'allow') return 'allow';
  if (a.type === 'block') return `block: ${a.reason}`;
  if (a.type === 'require_approvals') {
    // A live tier's `from` already holds its groups' members; the groups are named beside them.
    const groups = a.from_groups ? `group${a.from_groups.length === 1 ? '' : 's'} ${a.from_groups.join(', ')}` : '';
    const from = a.from ? ` from ${a.from.join(', ')}${groups ? ` (${groups})` : ''}` : groups ? ` from ${groups}` : '';
    return `require ${a.approvals} approval${a.approvals === 1 ? '' : 's'} by distinct principals${from}`;
  }
  return JSON.stringify(a);
}

const ruleWords = (r) => `${r.id}: ${matchWords(r.match)} -> ${actionWords(r.action)}`;

function limitUnit(l) {
  return l.currency ? `${l.currency}${l.assets ? ` of ${l.assets.join(', ')}` : ' of every asset'}` : l.asset;
}

function windowWords(s) {
  if (s % 86400 === 0) return `${s / 86400} d`;
  if (s % 3600 === 0) return `${s / 3600} h`;
  if (s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}

function perWords(l) {
  const per = [l.per_destination && 'destination', l.per_source && 'source', l.per_requester && 'requester'].filter(Boolean);
  return per.length ? `per ${per.join(', per ')}` : 'one over all';
}

const limitWords = (l) => `${l.id}: at most ${l.max_amount} ${limitUnit(l)} per ${windowWords(l.window_seconds)}, ${perWords(l)}${l.destination ? `, destinations ${destinationWords(l.destination)}` : ''}`;

function showPolicyView(which) {
  $('policy').hidden = which !== 'overview';
  $('policy-proposal').hidden = which !== 'proposal';
}

async function refreshPolicyProposals() {
  const seq = ++ui.policySeq;
  const state = $('policy-filter').value;
  const kind = $('policy-kind-filter').value;
  const { proposals } = await api(`/v3/policy/proposals?limit=100${state ? `&state=${state}` : ''}${kind ? `&kind=${kind}` : ''}`);
  if (seq !== ui.policySeq) return;
  const list = $('policy-proposals');
  list.replaceChildren();
  if (proposals.length === 0) {
    list.append(el('li', { class: 'none' }, state || kind ? 'No policy proposal of this state and kind.' : 'No policy proposals yet.'));
    return;
  }
  for (const p of proposals) {
    const li = el('li', { 'data-id': p.id, 'data-state': p.state, 'data-kind': p.subject_kind, class: p.id === ui.policyProposalId ? 'selected' : '' },
      el('div', { class: 'row' }, el('b', {}, `${kindWord(p.subject_kind)} - ${p.subject}`), el('span', { class: `badge s-${p.state}`, 'data-state': p.state }, p.state)),
      el('div', { class: 'who' }, `proposed by ${p.proposed_by_name ?? p.proposed_by} - ${changeWords(p)}`),
      el('div', { class: 'nodes' }, policyWindow(p)));
    li.addEventListener('click', () => { location.hash = `#/policy/${p.id}`; });
    list.append(li);
  }
}

/** The address book, the live rules and the try form; `quiet` (the poll) leaves forms and errors alone. */
async function openPolicyOverview(quiet = false) {
  ui.policyProposalId = null;
  ui.policyProposal = null;
  policy.base = null;
  showPolicyView('overview');
  for (const li of $('policy-proposals').children) li.classList.remove('selected');
  let book;
  let rules;
  try {
    [book, rules] = await Promise.all([api('/v3/policy/address-book'), api('/v3/policy/rules')]);
  } catch (err) {
    if (err instanceof Unauthenticated || quiet) return;
    showError('book-error', err);
    return;
  }
  if (ui.view !== 'policy' || ui.policyProposalId !== null) return;
  if (!quiet) clearError('book-error');
  policy.book = book.entries;
  policy.rules = rules;
  drawBook();
  drawRules();
  if (quiet) return;
  try {
    const { templates } = await api('/v3/templates');
    const select = $('try-template');
    const chosen = select.value;
    select.replaceChildren(...templates.map((t) => el('option', { value: t.template_key }, `${t.template_key} (v${t.latest_version})`)));
    if (templates.some((t) => t.template_key === chosen)) select.value = chosen;
  } catch (err) {
    if (!(err instanceof Unauthenticated)) showError('try-error', err);
  }
}

function drawBook() {
  const entries = policy.book;
  $('book-note').textContent = entries.length ? `- ${entries.length} entr${entries.length === 1 ? 'y' : 'ies'}` : '- empty: a policy that asks for book entries refuses every destination';
  $('book').tBodies[0].replaceChildren(...entries.map((e) => {
    const edit = el('button', { type: 'button', class: 'book-edit', title: 'Fill the form with this entry to propose a change' }, 'Change');
    edit.addEventListener('click', () => fillBookForm(e));
    const remove = el('button', { type: 'button', class: 'book-remove' }, 'Propose removal');
    remove.addEventListener('click', () => void proposeRemoval(e.name));
    return el('tr', { 'data-name': e.name, 'data-kind': e.kind },
      el('td', { class: 'event' }, e.name), el('td', {}, e.network), el('td', { class: 'addr' }, e.address), el('td', {}, orNone(e.tag)),
      el('td', {}, e.owner), el('td', {}, e.kind), el('td', { class: 'reason' }, e.notes ?? ''), el('td', {}, String(e.version)),
      el('td', {}, edit, ' ', remove));
  }));
}

function fillBookForm(e) {
  for (const f of ['name', ...ENTRY_FIELDS]) $(`book-${f}`).value = e[f] ?? '';
  clearError('book-form-error');
}

function drawRules() {
  const r = policy.rules;
  $('rules-note').textContent = r.version === null
    ? '- no rule set is live: movements are not policy-checked'
    : `- version ${r.version}, live since ${formatWhen(r.created_at)}; first match wins, a movement no rule matches is refused`;
  $('rules').replaceChildren(...r.rules.map((rule) => el('li', { 'data-rule-id': rule.id, 'data-action': rule.action?.type ?? '' },
    el('code', {}, rule.id), ' ', el('span', { class: 'match' }, matchWords(rule.match)), ' -> ', el('b', { class: 'action' }, actionWords(rule.action)),
    rule.description ? el('div', { class: 'hint' }, rule.description) : '')));
  $('limits').tBodies[0].replaceChildren(...(r.limits.length === 0
    ? [el('tr', {}, el('td', { class: 'hint', colspan: '6' }, 'no velocity limits'))]
    : r.limits.map((l) => el('tr', { 'data-limit-id': l.id },
      el('td', { class: 'event' }, l.id), el('td', { class: 'amount' }, l.max_amount), el('td', {}, limitUnit(l)),
      el('td', {}, `${windowWords(l.window_seconds)} (${l.window_seconds} s)`), el('td', {}, perWords(l)),
      el('td', {}, l.destination ? `destinations ${destinationWords(l.destination)}` : 'every movement')))));
}

/** Opens (or, quietly, re-reads) a policy proposal; what it is compared with is read when it is opened. */
async function openPolicyProposal(id, quiet = false) {
  if (ui.policyProposalId !== id) {
    clearError('policy-proposal-error');
    $('policy-reason').value = '';
    policy.base = null;
  }
  ui.policyProposalId = id;
  let detail;
  let base = policy.base?.id === id ? policy.base : null;
  try {
    detail = await api(`/v3/policy/proposals/${id}`);
    if (!base) {
      // Read once: the book or the rules as they are now, to show what the change does to them.
      base = detail.proposal.subject_kind === 'address_book'
        ? { id, book: (await api('/v3/policy/address-book')).entries, rules: null }
        : { id, book: null, rules: await api('/v3/policy/rules') };
    }
  } catch (err) {
    if (err instanceof Unauthenticated || quiet) return;
    // Nothing of another proposal stays on show, and no button acts on this one.
    showPolicyView('proposal');
    $('policy-proposal-title').textContent = `Cannot show policy proposal ${id}`;
    for (const f of ['policy-proposal-meta', 'policy-proposal-windows', 'policy-proposal-state', 'policy-diff-note', 'policy-replay-note']) $(f).textContent = '';
    $('policy-diff').replaceChildren();
    $('policy-proposal-history').tBodies[0].replaceChildren();
    for (const b of POLICY_BUTTONS) $(`policy-${b}`).disabled = true;
    showError('policy-proposal-error', err);
    return;
  }
  if (ui.policyProposalId !== id || ui.view !== 'policy') return;
  ui.policyProposal = detail;
  policy.base = base;
  showPolicyView('proposal');
  for (const li of $('policy-proposals').children) li.classList.toggle('selected', li.dataset.id === id);
  drawPolicyProposal(detail);
}

function drawPolicyProposal(d) {
  const p = d.proposal;
  $('policy-proposal-title').textContent = `${kindWord(p.subject_kind)} - ${p.subject}`;
  $('policy-proposal-meta').textContent = `${p.id} - proposed by ${p.proposed_by_name ?? p.proposed_by} on ${formatWhen(p.created_at)}` +
    ` - approver: ${p.approved_by_name ?? p.approved_by ?? 'none yet'} - challenge window ends ${formatWhen(p.challenge_ends_at)}`;
  $('policy-proposal-windows').textContent = policyWindow(p);
  const badge = $('policy-proposal-state');
  badge.textContent = p.state;
  badge.className = `badge s-${p.state}`;
  badge.dataset.state = p.state;
  // The buttons follow the machine; who may press them, and when, is Ferry's to say.
  $('policy-approve').disabled = p.state !== 'PROPOSED';
  $('policy-reject').disabled = p.state !== 'PROPOSED';
  $('policy-withdraw').disabled = p.state !== 'PROPOSED' && p.state !== 'APPROVED';
  $('policy-challenge').disabled = p.state !== 'APPROVED';
  $('policy-finalize').disabled = p.state !== 'APPROVED';
  $('policy-reason').disabled = p.state !== 'PROPOSED' && p.state !== 'APPROVED';
  drawPolicyDiff(p, policy.base);
  $('policy-replay-note').textContent = d.replay.ok ? `- the history replays to ${d.replay.state}` : `- the history does not replay: ${d.replay.reason}`;
  $('policy-proposal-history').tBodies[0].replaceChildren(...d.history.map((t) => el('tr', { 'data-event': t.event },
    el('td', {}, String(t.seq)), el('td', {}, formatWhen(t.at)), el('td', {}, t.from || '-'), el('td', {}, t.to),
    el('td', { class: 'event' }, t.event === 'xstate.init' ? 'created' : t.event), el('td', { class: 'actor', title: t.actor }, t.actor_name ?? t.actor),
    el('td', {}, typeof t.payload?.reason === 'string' ? t.payload.reason : ''))));
}

const diffGroup = (kind, title, items) => (items.length === 0 ? '' : el('div', { class: `diff-group ${kind.split('-')[1]}`, 'data-kind': kind },
  el('h4', {}, title), el('ul', {}, ...items)));
const fromTo = (from, to) => [el('span', { class: 'from' }, from), ' -> ', el('span', { class: 'to' }, to)];

/** What the proposal does to the book or the rules as they were when it was opened. */
function drawPolicyDiff(p, base) {
  const c = p.change ?? {};
  let note = '';
  let groups = [];
  if (c.op === 'put' || c.op === 'remove') {
    const name = c.op === 'put' ? c.entry.name : c.name;
    const now = (base?.book ?? []).find((e) => e.name === name) ?? null;
    const fields = (e, sign) => ENTRY_FIELDS.map((f) => el('li', { 'data-field': f }, `${sign} ${f}: ${orNone(e[f])}`));
    if (c.op === 'remove') {
      note = now ? '- against the book as it is' : '- the book has no such entry any more';
      groups = [diffGroup('entry-removed', `Entry ${name} removed`, now ? fields(now, '-') : [el('li', {}, `- ${name}`)])];
    } else if (now && now.proposal_id === p.id) {
      note = `- live: this is the book's entry, version ${now.version}`;
      groups = [diffGroup('entry-live', `Entry ${name} as proposed`, fields(c.entry, '='))];
    } else if (!now) {
      note = '- the book has no entry of this name: it is added';
      groups = [diffGroup('entry-added', `Entry ${name} added`, fields(c.entry, '+'))];
    } else {
      note = `- against the book's entry, version ${now.version}`;
      const changed = ENTRY_FIELDS.filter((f) => (now[f] ?? null) !== (c.entry[f] ?? null));
      groups = [
        diffGroup('entry-changed', `Entry ${name} changed`, changed.map((f) => el('li', { 'data-field': f }, `~ ${f}: `, ...fromTo(orNone(now[f]), orNone(c.entry[f]))))),
        diffGroup('entry-same', 'Unchanged', ENTRY_FIELDS.filter((f) => !changed.includes(f)).map((f) => el('li', { 'data-field': f }, `= ${f}: ${orNone(now[f])}`))),
      ];
      if (changed.length === 0) note += ' (the same as it is)';
    }
  } else if (c.op === 'replace') {
    const live = base?.rules ?? null;
    const sameAsLive = live && live.proposal_id === p.id;
    const old = live && !sameAsLive ? live : { version: null, rules: [], limits: [] };
    note = sameAsLive
      ? `- live as version ${live.version}: every rule it holds`
      : old.version === null
        ? '- no rule set is live: every rule is new'
        : `- against live version ${old.version}${old.version !== c.base_version ? ` (it was proposed on version ${c.base_version})` : ''}`;
    const byId = (xs) => new Map(xs.map((x) => [x.id, x]));
    const compare = (what, olds, news, words) => {
      const o = byId(olds);
      const n = byId(news);
      return [
        diffGroup(`${what}-added`, `${what === 'rules' ? 'Rules' : 'Limits'} added`, news.filter((x) => !o.has(x.id)).map((x) => el('li', { 'data-id': x.id }, `+ ${words(x)}`))),
        diffGroup(`${what}-removed`, `${what === 'rules' ? 'Rules' : 'Limits'} removed`, olds.filter((x) => !n.has(x.id)).map((x) => el('li', { 'data-id': x.id }, `- ${words(x)}`))),
        diffGroup(`${what}-changed`, `${what === 'rules' ? 'Rules' : 'Limits'} changed`, news.filter((x) => o.has(x.id) && JSON.stringify(o.get(x.id)) !== JSON.stringify(x))
          .map((x) => el('li', { 'data-id': x.id }, `~ ${x.id}: `, ...fromTo(words(o.get(x.id)), words(x))))),
      ];
    };
    const oldOrder = old.rules.map((r) => r.id).filter((id) => c.rules.some((r) => r.id === id));
    const newOrder = c.rules.map((r) => r.id).filter((id) => old.rules.some((r) => r.id === id));
    groups = [
      ...compare('rules', old.rules, c.rules, ruleWords),
      oldOrder.join() !== newOrder.join() ? diffGroup('order-changed', 'Order of the kept rules', [el('li', {}, ...fromTo(oldOrder.join(', '), newOrder.join(', ')))]) : '',
      ...compare('limits', old.limits, c.limits, limitWords),
      diffGroup('rules-new', 'The proposed rules, in order (first match wins)', c.rules.map((r, i) => el('li', { 'data-id': r.id }, `${i + 1}. ${ruleWords(r)}`))),
    ];
  } else {
    groups = [el('pre', {}, JSON.stringify(c, null, 2))];
  }
  $('policy-diff-note').textContent = note;
  groups = groups.filter((g) => g !== '');
  $('policy-diff').replaceChildren(...(groups.length ? groups : [el('p', { class: 'hint' }, 'It changes nothing.')]));
}

async function policyAction(action) {
  const id = ui.policyProposalId;
  if (!id) return;
  clearError('policy-proposal-error');
  let body = {};
  if (action === 'reject' || action === 'challenge') {
    const reason = $('policy-reason').value.trim();
    if (!reason) {
      showError('policy-proposal-error', new Error(`write why it is ${action === 'reject' ? 'rejected' : 'challenged'} in the reason`));
      return;
    }
    body = { reason };
  }
  try {
    await api(`/v3/policy/proposals/${id}/${action}`, body);
    if (body.reason) $('policy-reason').value = '';
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    showError('policy-proposal-error', err);
  }
  await Promise.all([openPolicyProposal(id, true), refreshPolicyProposals()]).catch(() => {});
}

/** After a proposal is made: its page, and the list with it. */
function showNewProposal(p) {
  location.hash = `#/policy/${p.id}`;
}

async function proposeBookEntry() {
  clearError('book-form-error');
  const text = (id) => $(id).value.trim();
  const body = {
    name: text('book-name'),
    network: text('book-network'),
    address: text('book-address'),
    tag: text('book-tag') || null,
    owner: text('book-owner'),
    kind: $('book-kind').value,
    notes: text('book-notes') || null,
  };
  $('book-submit').disabled = true;
  try {
    const p = await api('/v3/policy/address-book', body);
    $('book-form').reset();
    showNewProposal(p);
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    showError('book-form-error', err);
  } finally {
    $('book-submit').disabled = false;
  }
}

async function proposeRemoval(name) {
  clearError('book-error');
  try {
    showNewProposal(await api(`/v3/policy/address-book/${encodeURIComponent(name)}/remove`, {}));
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    showError('book-error', err);
  }
}

/** A refusal of a rule set, with every problem Ferry names. */
function showRuleSetError(err) {
  showError('rules-error', err);
  if (err.status) $('rules-error').textContent = `HTTP ${err.status} ${$('rules-error').textContent}`;
  const problems = err.details?.problems;
  if (Array.isArray(problems) && problems.length > 1) $('rules-error').textContent += ` (all problems: ${problems.join('; ')})`;
}

async function proposeRuleSet() {
  clearError('rules-error');
  let body;
  try {
    body = JSON.parse($('rules-json').value);
  } catch (err) {
    showError('rules-error', new Error(`the rule set is not JSON: ${err.message}`));
    return;
  }
  $('rules-submit').disabled = true;
  try {
    const p = await api('/v3/policy/rules', body);
    $('rules-json').value = '';
    showNewProposal(p);
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    showRuleSetError(err);
  } finally {
    $('rules-submit').disabled = false;
  }
}

/**
 * The live set as a starting point. Its groups are not part of what Ferry answers: a tier's `from`
 * already holds the members its `from_groups` named, so those names are dropped, not dangling.
 */
function copyLiveRules() {
  const r = policy.rules;
  const rules = (r?.rules ?? []).map((rule) => {
    if (!rule.action?.from_groups) return rule;
    const { from_groups: _groups, ...action } = rule.action;
    return { ...rule, action };
  });
  $('rules-json').value = JSON.stringify({ rules, limits: r?.limits ?? [] }, null, 2);
}

function verdictText(label, v) {
  const rule = v.rule_id ? `rule ${v.rule_id}` : v.action === 'no_policy' ? 'no rule set (not policy-checked)' : 'no rule matches';
  const lines = [`${label}${v.rule_set_version === null ? '' : ` (version ${v.rule_set_version})`}: ${v.outcome === 'allowed' ? 'ALLOWED' : 'REFUSED'} by ${rule} - action ${v.action}`];
  if (v.outcome === 'allowed') lines.push(`  approvals needed: ${v.approvals_required ?? '-'}${v.approvers_from ? ` from ${v.approvers_from.join(', ')}` : ''}`);
  else lines.push(`  ${v.code}: ${v.message}`);
  for (const p of v.prices ?? []) {
    lines.push(p.answer !== undefined ? `  price ${p.asset}/${p.currency}: ${p.answer} (${p.decimals} decimals), round ${p.round_id} of ${p.updated_at}` : `  price ${p.asset}/${p.currency}: none (${p.code})`);
  }
  for (const l of v.limits ?? []) {
    lines.push(`  limit ${l.limit_id}: ${l.used} used of ${l.max_amount}${l.currency ? ` ${l.currency}` : ''} per ${l.window_seconds} s${l.destination ? ` to ${l.destination}` : ''}` +
      `${l.source ? ` from ${l.source}` : ''}${l.requester ? ` requested by ${l.requester}` : ''}; with this movement ${l.total ?? '?'}${l.price_code ? ` (no price: ${l.price_code})` : l.exceeded ? ' - EXCEEDED' : ''}`);
  }
  return lines;
}

async function tryMovement() {
  clearError('try-error');
  $('try-result').hidden = true;
  let intent;
  try {
    intent = JSON.parse($('try-intent').value.trim() || '{}');
  } catch (err) {
    showError('try-error', new Error(`the intent is not JSON: ${err.message}`));
    return;
  }
  const requester = $('try-requester').value.trim();
  const body = { template_key: $('try-template').value, intent, ...(requester ? { requester } : {}) };
  $('try-submit').disabled = true;
  try {
    const r = await api('/v3/policy/test', body);
    const f = r.facts ?? {};
    const lines = [
      `movement: template ${f.templateKey}, lanes ${(f.lanes ?? []).join(', ') || '-'}, sources ${(f.sources ?? []).join(', ') || '-'}, ${f.amount ?? '?'} ${f.asset ?? '?'} to ` +
        `${f.destination ? `${f.destination.address}${f.destination.tag ? ` tag ${f.destination.tag}` : ''}` : '-'} (${f.entry ? `book entry ${f.entry.name}, ${f.entry.kind}` : 'not in the address book'}), requested by ${f.requester?.name ?? f.requester?.actor ?? '-'}`,
      ...verdictText('live', r.live),
      ...(r.proposed ? verdictText(`proposed ${r.proposed.proposal_id ?? ''} (${r.proposed.proposal_state})`, r.proposed) : ['proposed: no open rule set proposal']),
    ];
    const out = $('try-result');
    out.textContent = lines.join('\n');
    out.dataset.liveRule = r.live.rule_id ?? '';
    out.dataset.liveOutcome = r.live.outcome;
    out.hidden = false;
  } catch (err) {
    if (err instanceof Unauthenticated) return;
    showError('try-error', err);
  } finally {
    $('try-submit').disabled = false;
  }
}

// ------------------------------------------------------------------------------------------------
// DOM helpers

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== '') node.setAttribute(k, v);
  node.append(...children.filter((c) => c !== ''));
  return node;
}

function svgEl(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  node.append(...children);
  return node;
}

function svgText(x, y, text, cls, anchor) {
  const attrs = { x, y, class: cls };
  if (anchor) attrs['text-anchor'] = anchor;
  return svgEl('text', attrs, text);
}

/** Drawn at its natural size, shrunk (never enlarged) to fit its panel. */
function setSize(svg, width, height) {
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('width', String(width));
  svg.setAttribute('height', String(height));
}

function arrowDefs(id, cls) {
  return svgEl('defs', {}, svgEl('marker', { id, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
    svgEl('path', { d: 'M0,0 L10,5 L0,10 z', class: cls })));
}

// ------------------------------------------------------------------------------------------------
// Wiring

for (const s of REQUEST_STATES) $('state-filter').append(el('option', { value: s }, s));
$('state-filter').addEventListener('change', () => {
  ui.listPages = 1;
  void refreshList();
});
for (const s of PROPOSAL_STATES) $('proposal-filter').append(el('option', { value: s }, s));
$('proposal-filter').addEventListener('change', () => void refreshProposals().catch(() => {}));
$('proposal-approve').addEventListener('click', () => void proposalAction('approve', {}));
$('proposal-withdraw').addEventListener('click', () => void proposalAction('withdraw', {}));
$('proposal-challenge').addEventListener('click', () => void proposalAction('challenge', { reason: $('challenge-reason').value }));
for (const s of STANDING_ORDER_STATES) $('standing-order-filter').append(el('option', { value: s }, s));
$('standing-order-filter').addEventListener('change', () => void refreshStandingOrders().catch(() => {}));
for (const action of ['approve', 'pause', 'resume', 'reject', 'revoke']) $(`standing-order-${action}`).addEventListener('click', () => void standingOrderAction(action));
$('standing-order-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  void proposeStandingOrder();
});
$('so-trigger-kind').addEventListener('change', drawTriggerFields);
$('workers-class').addEventListener('change', () => void refreshWorkers().catch(() => {}));
$('workers-all').addEventListener('change', () => {
  if (ui.workers) drawWorkers();
});
for (const s of POLICY_PROPOSAL_STATES) $('policy-filter').append(el('option', { value: s }, s));
for (const id of ['policy-filter', 'policy-kind-filter']) $(id).addEventListener('change', () => void refreshPolicyProposals().catch(() => {}));
for (const action of POLICY_BUTTONS) $(`policy-${action}`).addEventListener('click', () => void policyAction(action));
$('book-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  void proposeBookEntry();
});
$('rules-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  void proposeRuleSet();
});
$('rules-copy').addEventListener('click', copyLiveRules);
$('try-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  void tryMovement();
});
$('resolution-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  void proposeResolution();
});
$('gate-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  void operateGate('confirm');
});
$('gate-skip').addEventListener('click', () => void operateGate('skip'));
$('movement-approve').addEventListener('click', () => void decide('approve'));
$('movement-reject').addEventListener('click', () => void decide('reject'));
$('resolution-kind').addEventListener('change', () => {
  $('resolution-ref-label').hidden = $('resolution-kind').value !== 'complete';
});
$('login-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  ui.token = $('token-input').value.trim();
  sessionStorage.setItem(TOKEN_KEY, ui.token);
  $('token-input').value = '';
  void start();
});
$('sign-out').addEventListener('click', () => signOut());
$('timeline').addEventListener('input', (ev) => travel(Number(ev.target.value)));
$('follow-live').addEventListener('click', () => travel(ui.transitions.length));
$('movement-pill').addEventListener('click', () => {
  ui.selected = MOVEMENT;
  render();
});
window.addEventListener('hashchange', () => void route());
// Polls skip a hidden tab; coming back shows the list as it is now, not as it was when the tab was hidden.
document.addEventListener('visibilitychange', () => {
  if (!document.hidden && ui.token && !$('app').hidden) void refreshCurrent().catch(() => {});
});
void start();
