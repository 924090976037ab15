import { ccipLane } from './ccip/lane.ts';
import { cctpLane } from './cctp/lane.ts';
import { cexLane } from './cex/lane.ts';
import { evmLane } from './evm/lane.ts';
import { gatewayLane } from './gateway/lane.ts';
import { hyperliquidLane } from './hyperliquid/lane.ts';
import type { LaneDefinition } from './lane.ts';
import { simLane } from './sim/lane.ts';
import { usdt0Lane } from './usdt0/lane.ts';

/**
 * Ferry's lanes: the one place the runtime, the config loader, the registries, the sweeps, the
 * balance fetchers, GET /v3/executors, the sandbox and the docs index learn about them (docs/lanes.md).
 * A lane builds on the lanes before it (`requires`), so the order is the order of registration.
 */
export const lanes = [simLane, evmLane, cexLane, cctpLane, hyperliquidLane, usdt0Lane, ccipLane, gatewayLane] as const;

export type LaneList = readonly LaneDefinition[];
const all: LaneList = lanes;

/** The lane of the list whose executors include this key; null when none does (a remote executor's own lane). */
export function laneOfExecutor(executorKey: string, list: LaneList = all): LaneDefinition | null {
  return list.find((l) => l.executorKeys.includes(executorKey)) ?? null;
}

/** The lane of this name in the list, or null. */
export function laneNamed(name: string, list: LaneList = all): LaneDefinition | null {
  return list.find((l) => l.name === name) ?? null;
}

/** A list without the named lanes (and without the lanes that require them). */
export function withoutLanes(names: readonly string[], list: LaneList = all): LaneDefinition[] {
  const removed = new Set(names);
  let changed = true;
  while (changed) {
    changed = false;
    for (const l of list) {
      if (!removed.has(l.name) && (l.requires ?? []).some((r) => removed.has(r))) {
        removed.add(l.name);
        changed = true;
      }
    }
  }
  return list.filter((l) => !removed.has(l.name));
}

/** The marks around the lane table of the docs index (README.md, "Lanes"); the table between them is laneIndex()'s. */
export const LANE_INDEX_MARKS = ['<!-- lanes:start (rendered from src/executors/lanes.ts) -->', '<!-- lanes:end -->'] as const;

/** The docs index's lane table: one row per lane of the list, with its executors and its docs page. */
export function laneIndex(list: LaneList = all): string {
  const rows = list.map((l) => `| \`${l.name}\` | ${l.summary} | ${l.executorKeys.map((k) => `\`${k}\``).join(', ')} | [${l.docs}](${l.docs}) |`);
  return ['| lane | what it does | executors | docs |', '|---|---|---|---|', ...rows].join('\n');
}
