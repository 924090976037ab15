/**
 * A sweep run's time budget, one rule for every sweep: spent() once maxRunMs (0: no budget) has
 * passed on `now` since the budget was made. A run checks it before starting each item and, once it
 * is spent, stops with budget_exhausted; the next run continues. The clock is injectable (tests step
 * it; no sleeps), and is read once here and once per check.
 */
export function runBudget(maxRunMs: number, now: () => number = Date.now): { spent(): boolean } {
  const started = now();
  return { spent: () => maxRunMs > 0 && now() - started >= maxRunMs };
}
