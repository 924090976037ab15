import { compareCodeUnits } from './canonical-json.ts';

/**
 * Pure graph algorithms over a plan's node keys and edges. Every result is deterministic: wherever
 * an algorithm has a free choice it takes the smallest node key (code-unit order), so the same plan
 * yields the same order, cycle and components in every process.
 */

export interface PlanGraph {
  /** Node keys, sorted. */
  keys: string[];
  predecessors: Map<string, string[]>;
  successors: Map<string, string[]>;
}

/** Builds adjacency lists; edges must reference known keys and be unique (validate.ts checks that first). */
export function buildGraph(keys: Iterable<string>, edges: Iterable<{ from: string; to: string }>): PlanGraph {
  const sorted = [...keys].sort(compareCodeUnits);
  const predecessors = new Map<string, string[]>(sorted.map((k) => [k, []]));
  const successors = new Map<string, string[]>(sorted.map((k) => [k, []]));
  for (const { from, to } of edges) {
    successors.get(from)?.push(to);
    predecessors.get(to)?.push(from);
  }
  for (const list of predecessors.values()) list.sort(compareCodeUnits);
  for (const list of successors.values()) list.sort(compareCodeUnits);
  return { keys: sorted, predecessors, successors };
}

/** Nodes without predecessors, sorted. */
export function roots(graph: PlanGraph): string[] {
  return graph.keys.filter((k) => graph.predecessors.get(k)!.length === 0);
}

/**
 * Kahn's algorithm; among nodes that are ready at the same time the smallest key goes first.
 * Returns null when the graph has a cycle.
 */
export function topologicalOrder(graph: PlanGraph): string[] | null {
  const remaining = new Map(graph.keys.map((k) => [k, graph.predecessors.get(k)!.length]));
  const ready = graph.keys.filter((k) => remaining.get(k) === 0);
  const order: string[] = [];
  while (ready.length > 0) {
    // A plan has at most a few hundred nodes: a sorted array is simpler than a heap and fast enough.
    ready.sort(compareCodeUnits);
    const key = ready.shift()!;
    order.push(key);
    for (const next of graph.successors.get(key)!) {
      const left = remaining.get(next)! - 1;
      remaining.set(next, left);
      if (left === 0) ready.push(next);
    }
  }
  return order.length === graph.keys.length ? order : null;
}

/** One cycle as its node keys in edge order, starting at its smallest key; null when acyclic. */
export function findCycle(graph: PlanGraph): string[] | null {
  const WHITE = 0;
  const GREY = 1;
  const BLACK = 2;
  const colour = new Map(graph.keys.map((k) => [k, WHITE]));
  for (const start of graph.keys) {
    if (colour.get(start) !== WHITE) continue;
    // Iterative depth-first search: path holds the grey nodes, cursor the next successor to try.
    const path: string[] = [start];
    const cursor: number[] = [0];
    colour.set(start, GREY);
    while (path.length > 0) {
      const top = path.length - 1;
      const node = path[top];
      const next = graph.successors.get(node)![cursor[top]++];
      if (next === undefined) {
        colour.set(node, BLACK);
        path.pop();
        cursor.pop();
      } else if (colour.get(next) === GREY) {
        const cycle = path.slice(path.indexOf(next));
        const smallest = cycle.indexOf([...cycle].sort(compareCodeUnits)[0]);
        return [...cycle.slice(smallest), ...cycle.slice(0, smallest)];
      } else if (colour.get(next) === WHITE) {
        colour.set(next, GREY);
        path.push(next);
        cursor.push(0);
      }
    }
  }
  return null;
}

/** Weakly connected components (edge direction ignored), each sorted, ordered by their smallest key. */
export function connectedComponents(graph: PlanGraph): string[][] {
  const seen = new Set<string>();
  const components: string[][] = [];
  for (const start of graph.keys) {
    if (seen.has(start)) continue;
    const component: string[] = [];
    const stack = [start];
    seen.add(start);
    while (stack.length > 0) {
      const node = stack.pop()!;
      component.push(node);
      for (const other of [...graph.predecessors.get(node)!, ...graph.successors.get(node)!]) {
        if (!seen.has(other)) {
          seen.add(other);
          stack.push(other);
        }
      }
    }
    components.push(component.sort(compareCodeUnits));
  }
  return components;
}

/** For each node, every node with a path to it (its transitive predecessors). Needs an acyclic graph. */
export function ancestors(graph: PlanGraph, order: string[]): Map<string, Set<string>> {
  const result = new Map<string, Set<string>>();
  for (const key of order) {
    const set = new Set<string>();
    for (const pred of graph.predecessors.get(key)!) {
      set.add(pred);
      for (const a of result.get(pred)!) set.add(a);
    }
    result.set(key, set);
  }
  return result;
}
