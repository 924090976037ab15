/**
 * Heap snapshots of another Node process, for the API benchmark's leak check. The process runs with
 * `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=DIR`; on the signal V8 collects garbage fully and
 * writes a snapshot there. What the snapshot still holds is what the process retains: comparing it
 * before and after traffic separates a leak from memory the allocator merely has not given back.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from './processes.ts';

/** Signals the process and returns the path of the snapshot it wrote once the file is complete. */
export async function takeSnapshot(pid: number, dir: string): Promise<string> {
  const before = new Set(readdirSync(dir));
  process.kill(pid, 'SIGUSR2');
  const file = await waitFor('a heap snapshot', () => readdirSync(dir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f)), 120_000, 100);
  const path = join(dir, file);
  // Written in pieces: done when the size stops changing and the JSON closes.
  let last = -1;
  await waitFor('the heap snapshot to be written', () => {
    const size = statSync(path).size;
    const done = size === last && size > 0 && readFileSync(path, 'utf8').trimEnd().endsWith('}');
    last = size;
    return done;
  }, 120_000, 500);
  return path;
}

export interface SnapshotSummary {
  /** The sum of every object's own size: the retained heap after a full collection. */
  retainedMb: number;
  objects: number;
  /** The constructors holding the most, largest first. */
  top: Array<{ name: string; count: number; mb: number }>;
}

/** Reads a .heapsnapshot (V8's JSON format: a flat nodes array described by snapshot.meta). */
export function summarizeSnapshot(path: string, topN = 8): SnapshotSummary {
  const snap = JSON.parse(readFileSync(path, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snap.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const types = snap.snapshot.meta.node_types[0];
  const byName = new Map<string, { count: number; bytes: number }>();
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const size = snap.nodes[i + sizeAt];
    total += size;
    const type = types[snap.nodes[i + typeAt]];
    const name = type === 'object' || type === 'closure' ? snap.strings[snap.nodes[i + nameAt]] : `(${type})`;
    const entry = byName.get(name) ?? { count: 0, bytes: 0 };
    entry.count++;
    entry.bytes += size;
    byName.set(name, entry);
  }
  const top = [...byName.entries()]
    .sort((a, b) => b[1].bytes - a[1].bytes)
    .slice(0, topN)
    .map(([name, e]) => ({ name, count: e.count, mb: Math.round((e.bytes / 1024 / 1024) * 10) / 10 }));
  return { retainedMb: Math.round((total / 1024 / 1024) * 10) / 10, objects: snap.nodes.length / width, top };
}
