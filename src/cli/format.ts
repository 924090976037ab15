import type { CliContext } from './command.ts';

type Printer = Pick<CliContext, 'flag' | 'out'>;

/** Left-aligned text columns for terminal listings. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

/** With --json, prints the value as one line of JSON and answers true; else false, for the caller's text. */
export function printedJson(ctx: Printer, value: unknown): boolean {
  if (!ctx.flag('json')) return false;
  ctx.out(JSON.stringify(value));
  return true;
}

export interface Listing<T> {
  columns: string[];
  row(item: T): string[];
  /** Printed instead of an empty table (saying how to make the first one, where there is a way). */
  empty?: string;
}

/** A table of the items, a row each; none: the listing's note about that, when it has one. */
export function printTable<T>(ctx: Printer, items: readonly T[], listing: Listing<T>): void {
  if (items.length === 0 && listing.empty !== undefined) ctx.out(listing.empty);
  else ctx.out(table(listing.columns, items.map((item) => listing.row(item))));
}

/** A listing command's output: with --json the items (or `json`, the whole answer) as JSON, else their table. */
export function printList<T>(ctx: Printer, items: readonly T[], listing: Listing<T> & { json?: unknown }): void {
  if (!printedJson(ctx, listing.json === undefined ? items : listing.json)) printTable(ctx, items, listing);
}
