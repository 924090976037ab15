/**
 * `ferry balances`: the latest watched balances from a running Ferry's API (GET /v3/balances), as
 * a table; a stale balance says so, with the class of the last fetch error. With --fresh, the
 * balances are fetched now (GET /v3/balances?fresh=true) and a source that failed or did not answer
 * in time is named per balance.
 */
import { UsageError, type CliCommand } from './command.ts';
import { printedJson, printTable } from './format.ts';
import { API_USAGE, apiOptions, apiTarget, callApi } from './movements.ts';

interface BalanceView {
  chain: string;
  wallet: string;
  label: string | null;
  asset: string;
  symbol: string | null;
  amount: string | null;
  as_of: string | null;
  stale: boolean;
  error: { code: string; at: string } | null;
  fresh?: { status: 'fetched' | 'failed' | 'timed_out' | 'not_fetched'; code: string | null };
}

/** Pages followed at most; a listing longer than this says how to narrow it. */
const MAX_PAGES = 20;

function status(b: BalanceView): string {
  if (b.fresh && b.fresh.status !== 'fetched') {
    const why = b.fresh.status === 'timed_out' ? 'timed out' : b.fresh.status === 'failed' ? `failed ${b.fresh.code ?? ''}`.trim() : 'not fetched';
    return `STALE (fresh fetch ${why})`;
  }
  if (b.fresh) return 'ok (fresh)';
  if (!b.stale) return b.error ? `ok (last fetch ${b.error.code})` : 'ok';
  return b.error ? `STALE (${b.error.code})` : 'STALE';
}

const balances: CliCommand = {
  path: ['balances'],
  summary: 'list the latest balance of every watched wallet, asset and chain',
  usage: `[--chain CHAIN] [--address ADDRESS] [--asset ASSET] [--fresh] ${API_USAGE}`,
  options: { ...apiOptions, chain: { type: 'string' }, address: { type: 'string' }, asset: { type: 'string' }, fresh: { type: 'boolean' } },
  async run(ctx) {
    const filters: Record<string, string> = {};
    for (const name of ['chain', 'address', 'asset']) {
      const value = ctx.option(name);
      if (value === '') throw new UsageError(`--${name} needs a value`);
      if (value !== undefined) filters[name] = value;
    }
    const fresh = ctx.flag('fresh');
    const target = await apiTarget(ctx);
    const rows: BalanceView[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query = new URLSearchParams({ ...filters, limit: '500', ...(cursor ? { cursor } : {}), ...(fresh ? { fresh: 'true' } : {}) });
      const page: { balances: BalanceView[]; next_cursor: string | null } = await callApi(target, 'GET', `/v3/balances?${query}`);
      rows.push(...page.balances);
      cursor = page.next_cursor;
      // A fresh fetch answers one page (the first 500 matching balances).
    } while (!fresh && cursor && ++pages < MAX_PAGES);
    if (printedJson(ctx, rows)) return;
    printTable(ctx, rows, {
      empty: Object.keys(filters).length ? 'No balance matches.' : 'No balances yet (is FERRY_BALANCE_SNAPSHOT_ENABLED on, with wallets to watch?).',
      columns: ['CHAIN', 'WALLET', 'LABEL', 'ASSET', 'AMOUNT', 'AS OF', 'STATUS'],
      row: (b) => [b.chain, b.wallet, b.label ?? '-', b.symbol ?? b.asset, b.amount ?? '-', b.as_of ?? 'never', status(b)],
    });
    if (rows.length > 0 && cursor) ctx.out(`(more balances than shown: narrow with --chain, --address or --asset)`);
  },
};

export const balanceCommands: CliCommand[] = [balances];
