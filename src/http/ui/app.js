// Ferry's visualizer: one page over the inspection API (/inspect/*), no dependencies. Diagrams are
// SVG laid out here: plans and machines are small, so a layered layout of a few dozen lines does.
//
// Time travel: the page keeps a movement's whole transition log; position k shows every entity in
// the state the first k transitions left it in. "Live" means k follows the end of the log, which
// grows from the server-sent event stream.

const SVG_NS = 'http://www.w3.org/2000/svg';
const TOKEN_KEY = 'ferry.token';
const LIST_REFRESH_MS = 4000;
const REQUEST_STATES = ['PENDING_APPROVAL', 'APPROVED', 'EXECUTING', 'WAITING_MANUAL_ACTION', 'MANUAL_INTERVENTION',
  'COMPLETED', 'FAILED', 'REJECTED', 'EXPIRED', 'CANCELLED'];

const $ = (id) => document.getElementById(id);

const ui = {
  token: sessionStorage.getItem(TOKEN_KEY),
  machines: new Map(), // machine id -> { view, layout }
  movementId: null,
  detail: null,
  transitions: [],
  position: null, // null: follow live; else how many transitions are applied
  selected: 'request', // 'request' or a node key
  stream: null, // AbortController of the open event stream
  streamStatus: 'idle',
  listTimer: null,
  listSeq: 0, // number of the latest list request: only its answer is drawn
  listed: null, // { movements, state } of the latest list answer
  renderQueued: false,
};

// ------------------------------------------------------------------------------------------------
// Talking to Ferry

class Unauthenticated extends Error {}

async function api(path) {
  const res = await fetch(path, { headers: { Authorization: `Bearer ${ui.token}`, Accept: 'application/json' } });
  if (res.status === 401) {
    signOut('Ferry refused that token; sign in again.');
    throw new Unauthenticated();
  }
  const body = await res.json().catch(() => null);
  if (!res.ok) throw new Error(body?.error?.message ?? `HTTP ${res.status}`);
  return body;
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
  ui.token = null;
  sessionStorage.removeItem(TOKEN_KEY);
  $('app').hidden = true;
  $('sign-out').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message ?? '';
}

async function start() {
  if (!ui.token) return signOut();
  $('login').hidden = true;
  $('app').hidden = false;
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
  clearInterval(ui.listTimer);
  ui.listTimer = setInterval(() => {
    if (!document.hidden) void refreshList().catch(() => {});
  }, LIST_REFRESH_MS);
  await route();
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
  const { movements } = await api(`/inspect/movements?limit=100${state ? `&state=${state}` : ''}`);
  if (seq !== ui.listSeq) return;
  ui.listed = { movements, state };
  drawList();
}

function drawList() {
  const { movements, state } = ui.listed;
  const list = $('movements');
  list.replaceChildren();
  if (movements.length === 0) {
    const li = el('li', { class: 'none' }, state ? `No movement is ${state}.` : 'No movements yet.');
    list.append(li);
    return;
  }
  for (const m of movements) {
    const li = el('li', { 'data-id': m.id, class: m.id === ui.movementId ? 'selected' : '' },
      el('div', { class: 'row' }, el('b', {}, m.template_key), el('span', { class: 'badge' })),
      el('div', { class: 'id' }, m.id),
      el('div', { class: 'nodes' }));
    li.addEventListener('click', () => { location.hash = `#/movements/${m.id}`; });
    list.append(li);
    drawListRow(li, m);
  }
}

/**
 * One row of the list. The open movement's row shows what its detail pane shows: the live end of the
 * transition stream, which moves with every commit, where the polled overview would lag behind it (a
 * poll is skipped while the tab is hidden, and an answer may predate the last transitions streamed).
 */
function drawListRow(li, m) {
  const live = m.id === ui.movementId ? liveSummary() : null;
  const requestState = live?.requestState ?? m.request_state;
  const nodeStates = live?.nodeStates ?? m.node_states;
  const total = live?.total ?? m.nodes_total;
  const done = (nodeStates.COMPLETED ?? 0) + (nodeStates.SKIPPED ?? 0);
  const badge = li.querySelector('.badge');
  badge.className = `badge s-${requestState}`;
  badge.textContent = requestState;
  badge.dataset.state = requestState;
  const nodes = li.querySelector('.nodes');
  nodes.dataset.done = String(done);
  nodes.dataset.total = String(total);
  nodes.textContent = `${done}/${total} steps done - ${new Date(m.created_at).toLocaleString()}`;
}

/** The open movement's request state and per-state step counts at the live end of its log, when the page has it. */
function liveSummary() {
  const d = ui.detail;
  if (!d || d.request.id !== ui.movementId) return null;
  const at = statesAt(ui.transitions.length);
  const nodeStates = {};
  for (const n of d.nodes) {
    const state = at.nodes.get(n.node_key)?.state ?? n.node_state;
    nodeStates[state] = (nodeStates[state] ?? 0) + 1;
  }
  return { requestState: at.request.state ?? d.request.request_state, nodeStates, total: d.nodes.length };
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
const balances = { timer: null };

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
    body.append(el('tr', { class: b.stale ? 'stale' : '', title: `${b.chain} ${b.wallet}\n${when}${why}` },
      el('td', { class: 'wallet' }, b.label ?? shortWallet(b.wallet)),
      el('td', {}, `${b.symbol ?? b.asset}`, el('div', { class: 'chain' }, `chain ${b.chain_id ?? b.chain}`)),
      el('td', { class: 'amount' }, b.amount ?? '-',
        b.stale ? el('div', { class: 'stale-badge' }, b.error ? `stale: ${b.error.code}` : 'stale') : '')));
  }
}

// ------------------------------------------------------------------------------------------------
// One movement

async function route() {
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
  Object.assign(ui, { movementId: id, detail: null, transitions: [], position: null, selected: 'request' });
  let detail;
  try {
    detail = await api(`/inspect/movements/${id}`);
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
  const request = { state: null, last: null };
  const nodes = new Map();
  const visited = { request: new Set(), nodes: new Map() };
  for (let i = 0; i < k; i++) {
    const t = ui.transitions[i];
    if (t.entity_type === 'request') {
      request.state = t.to_state;
      request.last = t;
      visited.request.add(t.to_state);
    } else {
      nodes.set(t.node_key, { state: t.to_state, last: t });
      if (!visited.nodes.has(t.node_key)) visited.nodes.set(t.node_key, new Set());
      visited.nodes.get(t.node_key).add(t.to_state);
    }
  }
  return { request, nodes, visited };
}

function render() {
  const d = ui.detail;
  if (!d) return;
  const k = applied();
  const at = statesAt(k);
  const requestState = at.request.state ?? d.request.request_state;

  $('movement-title').textContent = `${d.request.template_key} v${d.request.template_version}`;
  $('movement-meta').textContent =
    `${d.request.id} - created ${new Date(d.request.created_at).toLocaleString()} by ${d.request.created_by_name ?? d.request.created_by}` +
    ` - plan ${d.request.compiled_plan_hash.slice(0, 18)}...`;
  const badge = $('request-state');
  badge.textContent = requestState;
  badge.className = `badge s-${requestState}`;
  badge.dataset.state = requestState;
  $('request-pill').classList.toggle('selected', ui.selected === 'request');

  drawDag(d.plan, at);
  drawSelectedMachine(at);
  drawTimeline(k);
  drawLog(k);
  setStreamStatus();
  drawOpenListRow();
}

// ------------------------------------------------------------------------------------------------
// Plan DAG

const DAG = { w: 200, h: 50, gapX: 56, gapY: 20, pad: 12 };

function drawDag(plan, at) {
  const svg = $('dag');
  svg.replaceChildren(arrowDefs('dag-arrow', 'arrow'));
  const layers = new Map();
  for (const n of plan.nodes) {
    if (!layers.has(n.layer)) layers.set(n.layer, []);
    layers.get(n.layer).push(n);
  }
  const pos = new Map();
  let width = 0;
  let height = 0;
  for (const [layer, nodes] of layers) {
    nodes.forEach((n, i) => {
      const x = DAG.pad + layer * (DAG.w + DAG.gapX);
      const y = DAG.pad + i * (DAG.h + DAG.gapY);
      pos.set(n.key, { x, y });
      width = Math.max(width, x + DAG.w + DAG.pad);
      height = Math.max(height, y + DAG.h + DAG.pad);
    });
  }
  setSize(svg, Math.max(width, 200), Math.max(height, 80));
  for (const e of plan.edges) {
    const a = pos.get(e.from);
    const b = pos.get(e.to);
    if (!a || !b) continue;
    const x1 = a.x + DAG.w;
    const y1 = a.y + DAG.h / 2;
    const x2 = b.x - 2;
    const y2 = b.y + DAG.h / 2;
    const mx = (x1 + x2) / 2;
    svg.append(svgEl('path', { class: 'dag-edge', d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, 'marker-end': 'url(#dag-arrow)' }));
  }
  for (const n of plan.nodes) {
    const p = pos.get(n.key);
    const state = at.nodes.get(n.key)?.state ?? null;
    const g = svgEl('g', {
      class: `dag-node ${state ? `s-${state}` : 'absent'}${ui.selected === n.key ? ' selected' : ''}`,
      'data-key': n.key,
      'data-state': state ?? '',
      transform: `translate(${p.x},${p.y})`,
    });
    g.append(
      svgEl('rect', { width: DAG.w, height: DAG.h, rx: 8 }),
      svgText(10, 20, n.key, 'key'),
      svgText(10, 38, `${state ?? 'not created yet'} - ${n.executor_key ?? n.action_type}`, 'state'),
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
// Machine diagram

const M = { w: 148, h: 30, gapX: 58, gapY: 18, pad: 14, loop: 14 };

/**
 * Columns by breadth-first distance from the initial state, with every final state in one last
 * column, so a diagram reads left to right from birth to outcome. Within a column, states sit near
 * the average position of their predecessors (one barycentre pass keeps crossings down).
 */
function layoutMachine(view) {
  const order = view.states.map((s) => s.key);
  const final = new Set(view.states.filter((s) => s.final).map((s) => s.key));
  const layer = new Map([[view.initial, 0]]);
  const queue = [view.initial];
  while (queue.length) {
    const s = queue.shift();
    for (const e of view.graph.edges) {
      if (e.source === s && !layer.has(e.target) && !final.has(e.target)) {
        layer.set(e.target, layer.get(s) + 1);
        queue.push(e.target);
      }
    }
  }
  const deepest = Math.max(0, ...layer.values());
  for (const key of order) if (!layer.has(key) && !final.has(key)) layer.set(key, deepest + 1);
  const last = Math.max(0, ...layer.values()) + 1;
  for (const key of final) layer.set(key, last);
  const layers = [];
  for (const key of order) (layers[layer.get(key)] ??= []).push(key);
  const index = new Map();
  layers.forEach((keys, l) => {
    if (l > 0) {
      const bary = (k) => {
        const preds = view.graph.edges.filter((e) => e.target === k && layer.get(e.source) < l).map((e) => index.get(e.source) ?? 0);
        return preds.length ? preds.reduce((a, b) => a + b, 0) / preds.length : order.indexOf(k);
      };
      keys.sort((a, b) => bary(a) - bary(b));
    }
    keys.forEach((k, i) => index.set(k, i));
  });
  const tallest = Math.max(...layers.map((ks) => ks.length));
  const pos = new Map();
  layers.forEach((keys, l) => {
    const offset = ((tallest - keys.length) * (M.h + M.gapY)) / 2;
    keys.forEach((k, i) => pos.set(k, { x: M.pad + l * (M.w + M.gapX), y: M.pad + M.loop + offset + i * (M.h + M.gapY), layer: l }));
  });
  // One drawn edge per (source, target) pair, labelled with every event that takes it.
  const pairs = new Map();
  for (const e of view.graph.edges) {
    const id = `${e.source}->${e.target}`;
    if (!pairs.has(id)) pairs.set(id, { source: e.source, target: e.target, events: [] });
    const p = pairs.get(id);
    if (!p.events.includes(e.event)) p.events.push(e.event);
  }
  return {
    pos,
    pairs: [...pairs.values()],
    width: M.pad * 2 + layers.length * (M.w + M.gapX) - M.gapX,
    height: M.pad * 2 + M.loop + tallest * (M.h + M.gapY) + 40,
  };
}

function edgePath(a, b) {
  if (a === b) {
    const x = a.x + M.w / 2;
    return { d: `M${x - 12},${a.y} C${x - 20},${a.y - M.loop * 2} ${x + 20},${a.y - M.loop * 2} ${x + 12},${a.y - 2}`, lx: x, ly: a.y - M.loop - 4 };
  }
  if (b.layer > a.layer) {
    const x1 = a.x + M.w;
    const y1 = a.y + M.h / 2;
    const x2 = b.x - 2;
    const y2 = b.y + M.h / 2;
    const mx = (x1 + x2) / 2;
    // The label sits in the gap just before the target, where no state box can cover it: find the
    // curve's height there (x grows with t on this curve, so bisection finds the point).
    const at = (t, p0, p1, p2, p3) => (1 - t) ** 3 * p0 + 3 * (1 - t) ** 2 * t * p1 + 3 * (1 - t) * t ** 2 * p2 + t ** 3 * p3;
    const lx = x2 - M.gapX / 2;
    let lo = 0;
    let hi = 1;
    for (let i = 0; i < 30; i++) {
      const mid = (lo + hi) / 2;
      if (at(mid, x1, mx, mx, x2) < lx) lo = mid;
      else hi = mid;
    }
    return { d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, lx, ly: at(lo, y1, y1, y2, y2) - 4 };
  }
  // Backwards or within a layer: bow below both states.
  const x1 = a.x + M.w / 2 - 10;
  const y1 = a.y + M.h;
  const x2 = b.x + M.w / 2 + 10;
  const y2 = b.y + M.h + 2;
  const low = Math.max(y1, y2) + 28 + Math.abs(a.layer - b.layer) * 6;
  return { d: `M${x1},${y1} C${x1},${low} ${x2},${low} ${x2},${y2}`, lx: (x1 + x2) / 2, ly: low - 6 };
}

function drawSelectedMachine(at) {
  const d = ui.detail;
  const isRequest = ui.selected === 'request';
  const node = isRequest ? null : d.nodes.find((n) => n.node_key === ui.selected);
  const machineId = isRequest ? d.request.machine_id : node?.machine_id;
  const m = ui.machines.get(machineId);
  const svg = $('machine');
  svg.replaceChildren(arrowDefs('m-arrow', 'm-arrow'), arrowDefs('m-arrow-taken', 'm-arrow-taken'));
  if (!m) {
    $('machine-title').textContent = `Machine ${machineId ?? ''} (not described by this Ferry)`;
    return;
  }
  const entity = isRequest ? at.request : at.nodes.get(ui.selected) ?? { state: null, last: null };
  const visited = isRequest ? at.visited.request : at.visited.nodes.get(ui.selected) ?? new Set();
  $('machine-title').textContent = `${isRequest ? 'Request' : `Step ${ui.selected}`} - machine ${m.view.id} v${m.view.version}`;
  $('machine-title').title = 'The current state is highlighted; darker arrows are the events it accepts, the blue one the last step taken.';
  svg.dataset.machine = m.view.id;
  svg.dataset.current = entity.state ?? '';
  setSize(svg, m.layout.width, m.layout.height);

  const taken = entity.last && entity.last.from_state ? `${entity.last.from_state}->${entity.last.to_state}` : null;
  const labels = [];
  for (const p of m.layout.pairs) {
    const a = m.layout.pos.get(p.source);
    const b = m.layout.pos.get(p.target);
    const id = `${p.source}->${p.target}`;
    const cls = id === taken ? 'taken' : p.source === entity.state ? 'next' : '';
    const { d: path, lx, ly } = edgePath(a, b);
    svg.append(svgEl('path', { class: `m-edge ${cls}`, d: path, 'marker-end': `url(#${cls === 'taken' ? 'm-arrow-taken' : 'm-arrow'})` }, svgEl('title', {}, `${p.source} -> ${p.target}: ${p.events.join(', ')}`)));
    const text = cls === 'taken' ? entity.last.event_type : p.events.join(', ');
    labels.push(svgText(lx, ly, text, `m-label ${cls}`, 'middle'));
  }
  for (const s of m.view.states) {
    const p = m.layout.pos.get(s.key);
    const current = s.key === entity.state;
    const g = svgEl('g', {
      class: `m-state${s.final ? ' final' : ''}${visited.has(s.key) ? ' visited' : ''}${current ? ` current s-${s.key}` : ''}`,
      'data-state': s.key,
      transform: `translate(${p.x},${p.y})`,
    });
    g.append(svgEl('rect', { width: M.w, height: M.h, rx: s.final ? 14 : 6 }), svgText(M.w / 2, 19, s.key, '', 'middle'));
    svg.append(g);
  }
  svg.append(...labels); // above the states, so the highlighted labels stay readable
}

// ------------------------------------------------------------------------------------------------
// Timeline and log

function describe(t) {
  return t.entity_type === 'request' ? 'request' : `step ${t.node_key}`;
}

function drawTimeline(k) {
  const n = ui.transitions.length;
  const slider = $('timeline');
  slider.max = String(Math.max(n, 1));
  slider.value = String(Math.max(k, 1));
  slider.disabled = n <= 1;
  $('step-count').textContent = `${k} / ${n}`;
  $('follow-live').disabled = ui.position === null;
  const info = $('step-info');
  const t = ui.transitions[k - 1];
  if (!t) {
    info.replaceChildren();
    return;
  }
  info.dataset.step = String(k);
  info.dataset.event = t.event_type;
  const payload = Object.keys(t.event_payload).length ? el('pre', {}, JSON.stringify(t.event_payload, null, 2)) : '';
  info.replaceChildren(
    el('div', {},
      `Step ${k}: ${describe(t)} `,
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
$('state-filter').addEventListener('change', () => void refreshList());
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
$('request-pill').addEventListener('click', () => {
  ui.selected = 'request';
  render();
});
window.addEventListener('hashchange', () => void route());
// Polls skip a hidden tab; coming back shows the list as it is now, not as it was when the tab was hidden.
document.addEventListener('visibilitychange', () => {
  if (!document.hidden && ui.token && !$('app').hidden) void refreshList().catch(() => {});
});
void start();
