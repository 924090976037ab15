-- Up Migration
-- Balance snapshots (src/balances/). balance_watch holds one row per watched (chain, wallet,
-- asset): the sweep's schedule (last attempt, lease) and the latest result, success or error, so
-- GET /v3/balances reads one row per balance. balance_snapshots is the append-only history of
-- successful fetches; both are pruned by the same sweep after the retention period.
CREATE TABLE balance_watch (
  -- 'eip155:<chain id>' for EVM chains, 'sim' (or the name a sim entry gives) for the sim lane.
  chain text NOT NULL,
  -- A lowercase 0x address on EVM chains; any name on the sim lane.
  wallet text NOT NULL,
  -- 'native', a lowercase token address, or a sim asset symbol.
  asset text NOT NULL,
  lane text NOT NULL,
  fetcher text NOT NULL,
  symbol text,
  label text,
  amount numeric(78, 0),
  decimals integer,
  as_of timestamptz,
  last_attempt_at timestamptz,
  -- Set while one sweep run fetches it, so concurrent runs (other processes) skip it.
  leased_until timestamptz,
  -- The last failed fetch: a stable class of error only, never its text (it may name an RPC URL).
  error_code text,
  error_at timestamptz,
  consecutive_errors integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (chain, wallet, asset)
);

-- The sweep's walk: never attempted first, then the longest since the last attempt.
CREATE INDEX balance_watch_due ON balance_watch (last_attempt_at ASC NULLS FIRST);

CREATE TABLE balance_snapshots (
  id bigserial PRIMARY KEY,
  chain text NOT NULL,
  wallet text NOT NULL,
  asset text NOT NULL,
  amount numeric(78, 0) NOT NULL,
  decimals integer NOT NULL,
  taken_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX balance_snapshots_history ON balance_snapshots (chain, wallet, asset, taken_at DESC);
CREATE INDEX balance_snapshots_taken_at ON balance_snapshots (taken_at);

-- Down Migration
DROP TABLE IF EXISTS balance_snapshots;
DROP TABLE IF EXISTS balance_watch;
