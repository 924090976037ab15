// Layered layouts of the visualizer's diagrams (machines and plans), as pure functions of their
// description: no DOM, so the same code the page draws with is what test/ui-layout.test.ts checks.
//
// Text in the diagrams is set in a monospace font (app.css, `svg text`), so its width is known
// here without measuring: every common monospace face advances 0.6 em per character (DejaVu Sans
// Mono and Menlo 0.602, Liberation Mono 0.600, Consolas 0.55); CHAR_EM keeps a margin above that.

export const CHAR_EM = 0.62;
export const FONT = { state: 11, label: 10, dagKey: 13, dagState: 11 };
export const LINE = 12; // line height of an edge label, px

/** The width of `text` at `size` px in the diagrams' monospace font (an upper bound). */
export function textWidth(text, size) {
  return Math.ceil(String(text).length * CHAR_EM * size);
}

// ------------------------------------------------------------------------------------------------
// Ordering the states within their layers

/** Every state's position within its layer, centred on the layer's middle (what the drawing does). */
function centred(layers) {
  const at = new Map();
  for (const keys of layers) keys.forEach((k, i) => at.set(k, i - (keys.length - 1) / 2));
  return at;
}

/**
 * How many pairs of forward edges (to a later layer) cross, the states placed as `layers` orders
 * them. Edges spanning several layers are taken as straight between their ends: two cross when
 * their order swaps between the layers both span.
 */
export function countCrossings(layers, edges) {
  const layerOf = new Map();
  layers.forEach((keys, l) => keys.forEach((k) => layerOf.set(k, l)));
  const at = centred(layers);
  const forward = edges.filter((e) => layerOf.get(e.target) > layerOf.get(e.source));
  const yAt = (e, l) => {
    const la = layerOf.get(e.source);
    const lb = layerOf.get(e.target);
    return at.get(e.source) + ((at.get(e.target) - at.get(e.source)) * (l - la)) / (lb - la);
  };
  let crossings = 0;
  for (let i = 0; i < forward.length; i++) {
    for (let j = i + 1; j < forward.length; j++) {
      const a = forward[i];
      const b = forward[j];
      const lo = Math.max(layerOf.get(a.source), layerOf.get(b.source));
      const hi = Math.min(layerOf.get(a.target), layerOf.get(b.target));
      if (lo >= hi) continue;
      const before = yAt(a, lo) - yAt(b, lo);
      const after = yAt(a, hi) - yAt(b, hi);
      if (before * after < 0) crossings++;
    }
  }
  return crossings;
}

/**
 * Orders each layer to keep crossings down: alternate sweeps (down: by the mean position of a
 * state's neighbours in earlier layers; up: in later ones), keeping the best order seen. Ties keep
 * the order they had, so the result depends only on the input.
 */
export function orderLayers(layers, edges, sweeps = 12) {
  const layerOf = new Map();
  layers.forEach((keys, l) => keys.forEach((k) => layerOf.set(k, l)));
  let current = layers.map((keys) => [...keys]);
  let best = current.map((keys) => [...keys]);
  let bestCount = countCrossings(best, edges);
  for (let s = 0; s < sweeps && bestCount > 0; s++) {
    const down = s % 2 === 0;
    const range = current.map((_, l) => l);
    if (!down) range.reverse();
    for (const l of range) {
      const at = centred(current);
      const bary = new Map();
      for (const k of current[l]) {
        const ys = [];
        for (const e of edges) {
          if (down && e.target === k && layerOf.get(e.source) < l) ys.push(at.get(e.source));
          if (!down && e.source === k && layerOf.get(e.target) > l) ys.push(at.get(e.target));
        }
        bary.set(k, ys.length ? ys.reduce((a, b) => a + b, 0) / ys.length : at.get(k));
      }
      const was = new Map(current[l].map((k, i) => [k, i]));
      current[l] = [...current[l]].sort((a, b) => bary.get(a) - bary.get(b) || was.get(a) - was.get(b));
    }
    const count = countCrossings(current, edges);
    if (count < bestCount) {
      bestCount = count;
      best = current.map((keys) => [...keys]);
    }
  }
  return best;
}

// ------------------------------------------------------------------------------------------------
// Machine diagrams

export const M = { h: 30, padX: 12, minW: 90, gapY: 16, minGap: 44, pad: 14, loop: 16, margin: 6, lane: LINE + 3, laneStep: 4 };

/** Columns by breadth-first distance from the initial state; every final state in one last column. */
export function machineLayers(view) {
  const order = view.states.map((s) => s.key);
  const final = new Set(view.states.filter((s) => s.final).map((s) => s.key));
  const layer = new Map(view.initial ? [[view.initial, 0]] : []);
  const queue = view.initial ? [view.initial] : [];
  while (queue.length) {
    const s = queue.shift();
    for (const e of view.graph.edges) {
      if (e.source === s && !layer.has(e.target) && !final.has(e.target)) {
        layer.set(e.target, layer.get(s) + 1);
        queue.push(e.target);
      }
    }
  }
  const deepest = Math.max(-1, ...layer.values());
  for (const key of order) if (!layer.has(key) && !final.has(key)) layer.set(key, deepest + 1);
  const last = Math.max(-1, ...layer.values()) + 1;
  for (const key of final) layer.set(key, last);
  const layers = [];
  for (const key of order) (layers[layer.get(key)] ??= []).push(key);
  return layers.filter(Boolean);
}

/** A label's box: its top-left corner, size and lines (one event a line). */
function labelBox(lines, x, y) {
  return { x, y, w: Math.max(...lines.map((l) => textWidth(l, FONT.label))), h: lines.length * LINE, lines };
}

/**
 * Lays a machine out: states in columns (each column as wide as its longest state name), edges as
 * paths, and a box for every edge's label where it touches no state and no other label:
 *   - to a later column: a curve, its label in the gap just before the target's column;
 *   - to itself: a loop over the state, its label above the loop (room is kept above the state);
 *   - within a column: out of the state's right side and into the other's, through the gap after
 *     the column, where its label sits;
 *   - to an earlier column: down the gap after the source's column to a lane of its own below
 *     every state, along it and up the gap after the target's column; its label on the lane.
 * Labels in one gap are stacked where they would touch.
 */
export function layoutMachine(view) {
  const edges = view.graph.edges;
  const layers = orderLayers(machineLayers(view), edges);
  const layerOf = new Map();
  layers.forEach((keys, l) => keys.forEach((k) => layerOf.set(k, l)));

  // One drawn edge per (source, target) pair, labelled with every event that takes it.
  const pairMap = new Map();
  for (const e of edges) {
    const id = `${e.source}->${e.target}`;
    if (!pairMap.has(id)) pairMap.set(id, { id, source: e.source, target: e.target, events: [] });
    const p = pairMap.get(id);
    if (!p.events.includes(e.event)) p.events.push(e.event);
  }
  const pairs = [...pairMap.values()];
  for (const p of pairs) {
    const la = layerOf.get(p.source);
    const lb = layerOf.get(p.target);
    p.kind = p.source === p.target ? 'loop' : lb > la ? 'forward' : lb === la ? 'within' : 'back';
  }

  // Column widths: the longest state name, or a self-loop's label above it.
  const colW = layers.map((keys) => Math.max(M.minW, ...keys.map((k) => textWidth(k, FONT.state) + 2 * M.padX)));
  for (const p of pairs) if (p.kind === 'loop') {
    const l = layerOf.get(p.source);
    colW[l] = Math.max(colW[l], labelBox(p.events, 0, 0).w + 2 * M.margin);
  }
  // Room above a state for its loop and the loop's label.
  const above = new Map();
  for (const p of pairs) if (p.kind === 'loop') above.set(p.source, M.loop + 4 + p.events.length * LINE);

  // Verticals of within-column and backward edges run in the gap after a column, each on its own x.
  const verticals = layers.map(() => []);
  for (const p of pairs) {
    if (p.kind === 'within') verticals[layerOf.get(p.source)].push({ pair: p, end: 'both' });
    if (p.kind === 'back') {
      verticals[layerOf.get(p.source)].push({ pair: p, end: 'source' });
      verticals[layerOf.get(p.target)].push({ pair: p, end: 'target' });
    }
  }
  const laneRoom = (l) => (verticals[l].length ? M.margin + verticals[l].length * M.laneStep : 0);

  // Labels per gap (the gap after column l): forward edges into column l + 1, within-column ones of l.
  const gapLabels = layers.map(() => []);
  for (const p of pairs) {
    if (p.kind === 'forward') gapLabels[layerOf.get(p.target) - 1].push(p);
    if (p.kind === 'within') gapLabels[layerOf.get(p.source)].push(p);
  }
  const gapW = layers.map((_, l) => {
    const widest = Math.max(0, ...gapLabels[l].map((p) => labelBox(p.events, 0, 0).w));
    const need = laneRoom(l) + (widest ? widest + 2 * M.margin : 0);
    return l === layers.length - 1 ? Math.max(need, M.pad) : Math.max(M.minGap, need);
  });
  const colX = [];
  let x = M.pad;
  layers.forEach((_, l) => {
    colX[l] = x;
    x += colW[l] + gapW[l];
  });
  const width = x;

  // Rows: each column stacked with the room its loops need, columns centred on the tallest.
  const colH = layers.map((keys) => keys.reduce((h, k, i) => h + (i ? M.gapY : 0) + (above.get(k) ?? 0) + M.h, 0));
  const tallest = Math.max(...colH);
  const pos = new Map();
  layers.forEach((keys, l) => {
    let y = M.pad + (tallest - colH[l]) / 2;
    keys.forEach((k, i) => {
      y += (i ? M.gapY : 0) + (above.get(k) ?? 0);
      pos.set(k, { x: colX[l], y, w: colW[l], h: M.h, layer: l });
      y += M.h;
    });
  });
  const statesBottom = M.pad + tallest;
  let bottom = statesBottom;

  // Forward and within-column edges with their labels, stacked per gap.
  const mid = (k) => pos.get(k).y + M.h / 2;
  const vx = new Map(); // `${pair.id} ${end}` -> x of its vertical
  verticals.forEach((vs, l) => vs.forEach((v, i) => vx.set(`${v.pair.id} ${v.end}`, colX[l] + colW[l] + M.margin + i * M.laneStep)));
  gapLabels.forEach((ps, l) => {
    const lx = colX[l] + colW[l] + laneRoom(l) + M.margin;
    const wanted = ps.map((p) => {
      const a = pos.get(p.source);
      const b = pos.get(p.target);
      if (p.kind === 'forward') {
        const x1 = a.x + a.w;
        const y1 = mid(p.source);
        const x2 = b.x - 2;
        const y2 = mid(p.target);
        const mx = (x1 + x2) / 2;
        p.d = `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`;
        // The curve's height at the label's middle (x grows with t on this curve: bisection finds it).
        const at = (t, p0, p1, p2, p3) => (1 - t) ** 3 * p0 + 3 * (1 - t) ** 2 * t * p1 + 3 * (1 - t) * t ** 2 * p2 + t ** 3 * p3;
        const target = lx + labelBox(p.events, 0, 0).w / 2;
        let lo = 0;
        let hi = 1;
        for (let i = 0; i < 30; i++) {
          const m = (lo + hi) / 2;
          if (at(m, x1, mx, mx, x2) < target) lo = m;
          else hi = m;
        }
        return { p, y: at(lo, y1, y1, y2, y2) - p.events.length * LINE - 1 };
      }
      const v = vx.get(`${p.id} both`);
      const y1 = mid(p.source) + 6;
      const y2 = mid(p.target) + 6;
      p.d = `M${a.x + a.w},${y1} H${v} V${y2} H${b.x + b.w + 2}`;
      return { p, y: (y1 + y2) / 2 - (p.events.length * LINE) / 2 };
    });
    wanted.sort((a, b) => a.y - b.y);
    let floor = -Infinity;
    for (const w of wanted) {
      const y = Math.max(w.y, floor, 2);
      w.p.label = labelBox(w.p.events, lx, y);
      floor = y + w.p.label.h + 2;
      bottom = Math.max(bottom, floor);
    }
  });

  // Loops over their state, labels above them.
  for (const p of pairs) if (p.kind === 'loop') {
    const a = pos.get(p.source);
    const cx = a.x + a.w / 2;
    p.d = `M${cx - 12},${a.y} C${cx - 20},${a.y - M.loop * 1.6} ${cx + 20},${a.y - M.loop * 1.6} ${cx + 12},${a.y - 2}`;
    const box = labelBox(p.events, 0, 0);
    p.label = labelBox(p.events, cx - box.w / 2, a.y - M.loop - 2 - box.h);
  }

  // Backward edges: lanes below every state, the shortest spans nearest; a lane holds several edges
  // whose spans and labels do not meet, and no lane's label meets a label stacked in a gap.
  const placed = pairs.filter((p) => p.label);
  const meets = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
  const lanes = []; // per lane: the [left, right] extents taken on it
  const back = pairs.filter((p) => p.kind === 'back').map((p) => {
    const v1 = vx.get(`${p.id} source`);
    const v2 = vx.get(`${p.id} target`);
    const text = [p.events.join(', ')];
    const w = labelBox(text, 0, 0).w;
    const cx = (v1 + v2) / 2;
    return { p, v1, v2, text, w, cx, left: Math.min(v2, cx - w / 2) - M.margin, right: Math.max(v1, cx + w / 2) + M.margin };
  });
  back.sort((a, b) => a.v1 - a.v2 - (b.v1 - b.v2) || a.v2 - b.v2);
  for (const e of back) {
    const laneAt = (i) => statesBottom + M.margin + (i + 1) * M.lane;
    const fits = (i) => (lanes[i] ?? []).every(([l, r]) => e.right <= l || e.left >= r) &&
      placed.every((q) => !meets(q.label, { x: e.cx - e.w / 2, y: laneAt(i) - LINE - 1, w: e.w, h: LINE }));
    let i = 0;
    while (!fits(i)) i++;
    while (lanes.length <= i) lanes.push([]);
    lanes[i].push([e.left, e.right]);
    const laneY = laneAt(i);
    const a = pos.get(e.p.source);
    const b = pos.get(e.p.target);
    e.p.d = `M${a.x + a.w},${mid(e.p.source) + 6} H${e.v1} V${laneY} H${e.v2} V${mid(e.p.target) + 6} H${b.x + b.w + 2}`;
    e.p.label = labelBox(e.text, e.cx - e.w / 2, laneY - LINE - 1);
  }
  const lane = Math.max(bottom, statesBottom + M.margin + lanes.length * M.lane);
  const labelRight = Math.max(0, ...pairs.map((p) => p.label.x + p.label.w));
  return { layers, pos, pairs, width: Math.max(width, labelRight + M.pad), height: lane + M.pad };
}

// ------------------------------------------------------------------------------------------------
// Plan diagrams

export const DAG = { h: 50, padX: 10, minW: 140, gapX: 56, gapY: 20, pad: 12 };

/**
 * Lays a plan out in its layers, ordered to keep crossings down, each column as wide as the
 * longest text of its nodes: `lines(node)` gives the texts a node may show (its key at the key's
 * size first, then every second line it may show).
 */
export function layoutPlan(plan, lines) {
  const byLayer = [];
  for (const n of plan.nodes) (byLayer[n.layer] ??= []).push(n.key);
  const edges = plan.edges.map((e) => ({ source: e.from, target: e.to }));
  const layers = orderLayers(byLayer.filter(Boolean), edges);
  const node = new Map(plan.nodes.map((n) => [n.key, n]));
  const colW = layers.map((keys) => Math.max(DAG.minW, ...keys.map((k) => {
    const [key, ...rest] = lines(node.get(k));
    return Math.max(textWidth(key, FONT.dagKey), ...rest.map((t) => textWidth(t, FONT.dagState))) + 2 * DAG.padX;
  })));
  const pos = new Map();
  let x = DAG.pad;
  let height = 0;
  layers.forEach((keys, l) => {
    keys.forEach((k, i) => {
      const y = DAG.pad + i * (DAG.h + DAG.gapY);
      pos.set(k, { x, y, w: colW[l], h: DAG.h });
      height = Math.max(height, y + DAG.h + DAG.pad);
    });
    x += colW[l] + DAG.gapX;
  });
  return { layers, pos, width: Math.max(x - DAG.gapX + DAG.pad, 200), height: Math.max(height, 80) };
}
