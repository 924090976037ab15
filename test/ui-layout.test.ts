/**
 * The visualizer's diagram layouts (src/http/ui/layout.js, the module the page draws with), over
 * every machine /inspect/machines describes: no two state boxes overlap, no label covers a state or
 * another label, every box is wide enough for its text at the font metrics the layout assumes, and
 * the states are ordered to cross fewer edges than the order they are declared in. The font metrics
 * themselves are checked in a real browser by test/ui-layout-browser.test.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeMachine, inspectedMachines } from '../src/http/inspect.ts';
import { CHAR_EM, DAG, FONT, LINE, M, countCrossings, layoutMachine, layoutPlan, machineLayers, textWidth, type Box } from '../src/http/ui/layout.js';

const views = inspectedMachines.map(describeMachine);
const overlap = (a: Box, b: Box) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
const show = (b: Box) => `(${b.x.toFixed(1)},${b.y.toFixed(1)} ${b.w.toFixed(1)}x${b.h.toFixed(1)})`;

test('the machines described are the ones the page draws', () => {
  assert.deepEqual(views.map((v) => v.id), ['ferry.request', 'ferry.node', 'ferry.callback_delivery', 'ferry.template_proposal', 'ferry.credential_proposal', 'ferry.policy_proposal']);
});

for (const view of views) {
  test(`${view.id}: no two state boxes overlap, and no label covers a state or another label`, () => {
    const layout = layoutMachine(view);
    const states = [...layout.pos.entries()];
    assert.equal(states.length, view.states.length);
    for (let i = 0; i < states.length; i++) {
      for (let j = i + 1; j < states.length; j++) {
        assert.ok(!overlap(states[i][1], states[j][1]), `${states[i][0]} ${show(states[i][1])} overlaps ${states[j][0]} ${show(states[j][1])}`);
      }
    }
    const labels = layout.pairs.map((p) => ({ id: p.id, box: p.label }));
    assert.equal(labels.length, new Set(view.graph.edges.map((e) => `${e.source}->${e.target}`)).size, 'one label per drawn edge');
    for (const l of labels) {
      for (const [key, box] of states) assert.ok(!overlap(l.box, box), `the label of ${l.id} ${show(l.box)} covers ${key} ${show(box)}`);
    }
    for (let i = 0; i < labels.length; i++) {
      for (let j = i + 1; j < labels.length; j++) {
        assert.ok(!overlap(labels[i].box, labels[j].box), `the labels of ${labels[i].id} ${show(labels[i].box)} and ${labels[j].id} ${show(labels[j].box)} overlap`);
      }
    }
    // Everything inside the drawing.
    for (const b of [...states.map(([, s]) => s), ...labels.map((l) => l.box)]) {
      assert.ok(b.x >= 0 && b.y >= 0 && b.x + b.w <= layout.width && b.y + b.h <= layout.height, `${show(b)} is outside ${layout.width}x${layout.height}`);
    }
  });

  test(`${view.id}: every box is wide enough for its text, and every label for its events`, () => {
    const layout = layoutMachine(view);
    for (const [key, box] of layout.pos) {
      // The text at 0.6 em a character (what monospace faces advance), centred with room on both sides.
      assert.ok(box.w >= key.length * 0.6 * FONT.state + 2 * 8, `${key}: ${box.w} px for ${key.length} characters`);
      assert.ok(textWidth(key, FONT.state) >= key.length * 0.6 * FONT.state);
    }
    for (const p of layout.pairs) {
      for (const line of p.label.lines) assert.ok(p.label.w >= line.length * 0.6 * FONT.label, `${p.id}: "${line}" is wider than its label (${p.label.w})`);
      assert.ok(p.label.h >= p.label.lines.length * LINE);
      assert.deepEqual(p.label.lines.join(', ').split(', ').sort(), [...p.events].sort(), `${p.id}: its label names every event that takes it`);
    }
  });

  test(`${view.id}: its states cross no more edges than in declared order`, () => {
    const layout = layoutMachine(view);
    const edges = view.graph.edges;
    const declared = machineLayers(view);
    assert.deepEqual(layout.layers.map((l) => [...l].sort()), declared.map((l) => [...l].sort()), 'the same states in the same columns');
    assert.ok(countCrossings(layout.layers, edges) <= countCrossings(declared, edges));
  });
}

test('ordering takes crossings out: the node machine crosses fewer edges than in declared order', () => {
  const node = views.find((v) => v.id === 'ferry.node')!;
  const declared = countCrossings(machineLayers(node), node.graph.edges);
  const laid = countCrossings(layoutMachine(node).layers, node.graph.edges);
  assert.ok(laid < declared, `${laid} crossings laid out, ${declared} declared`);
});

test('countCrossings counts two edges that swap between layers, and not two that do not', () => {
  const edges = [{ source: 'a', target: 'd' }, { source: 'b', target: 'c' }];
  assert.equal(countCrossings([['a', 'b'], ['c', 'd']], edges), 1);
  assert.equal(countCrossings([['a', 'b'], ['d', 'c']], edges), 0);
});

test('a plan node is as wide as its longest text, so an executor name stays inside its box', () => {
  const executor = 'exec.evm.erc20.transfer.with-a-long-name.on-mainnet';
  const plan = {
    nodes: [
      { key: 'pay', layer: 0, executor_key: executor },
      { key: 'short', layer: 0, executor_key: 'x' },
      { key: 'next', layer: 1, executor_key: 'y' },
    ],
    edges: [{ from: 'pay', to: 'next' }],
  };
  const layout = layoutPlan(plan, (n) => [n.key, `AWAITING_SIGNATURE - ${n.executor_key}`]);
  const pay = layout.pos.get('pay')!;
  assert.ok(pay.w >= `AWAITING_SIGNATURE - ${executor}`.length * 0.6 * FONT.dagState + 2 * DAG.padX, `${pay.w}`);
  assert.equal(layout.pos.get('short')!.w, pay.w, 'a column is one width');
  assert.ok(layout.pos.get('next')!.x >= pay.x + pay.w + DAG.gapX - 1, 'the next column starts after the widest box');
  assert.ok(layout.width >= layout.pos.get('next')!.x + layout.pos.get('next')!.w);
  assert.ok(!overlap(pay, layout.pos.get('short')!));
});

test('the layout assumes at least 0.6 em a character, and a state box at least a readable height', () => {
  assert.ok(CHAR_EM >= 0.6);
  assert.ok(M.h >= FONT.state * 2);
});
