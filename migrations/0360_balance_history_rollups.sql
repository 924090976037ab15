-- Up Migration
-- Balance history (src/balances/rollup.ts): hourly and daily rollups of balance_snapshots, kept
-- longer than the snapshots themselves, for charts. One row per balance, bucket size and bucket.
-- The rollup folds each snapshot in once: balance_rollup_progress holds the last snapshot id folded.
CREATE TABLE balance_rollups (
  chain text NOT NULL,
  wallet text NOT NULL,
  asset text NOT NULL,
  -- 'hour' or 'day' (UTC).
  bucket text NOT NULL CHECK (bucket IN ('hour', 'day')),
  bucket_start timestamptz NOT NULL,
  decimals integer NOT NULL,
  min_amount numeric(78, 0) NOT NULL,
  max_amount numeric(78, 0) NOT NULL,
  -- The amount of the latest snapshot in the bucket, and when it was taken.
  last_amount numeric(78, 0) NOT NULL,
  last_at timestamptz NOT NULL,
  samples integer NOT NULL,
  PRIMARY KEY (chain, wallet, asset, bucket, bucket_start)
);

CREATE INDEX balance_rollups_retention ON balance_rollups (bucket, bucket_start);

CREATE TABLE balance_rollup_progress (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  last_snapshot_id bigint NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO balance_rollup_progress (id) VALUES (true);

-- Down Migration
DROP TABLE IF EXISTS balance_rollup_progress;
DROP TABLE IF EXISTS balance_rollups;
