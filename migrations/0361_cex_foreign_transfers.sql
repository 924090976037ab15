-- Up Migration
-- Transfers on an exchange account that no movement made (src/actors/cex-transfer-ingest.ts):
-- deposits and withdrawals seen in the exchange's history, recorded once per venue and provider id.
CREATE TABLE cex_foreign_transfers (
  id bigserial PRIMARY KEY,
  -- The CEX account key of the configuration file (cex.accounts[].key).
  venue text NOT NULL,
  direction text NOT NULL CHECK (direction IN ('deposit', 'withdrawal')),
  -- The exchange's own id of the deposit or withdrawal.
  provider_id text NOT NULL,
  asset text NOT NULL,
  -- A decimal string, as the exchange gives it.
  amount text NOT NULL,
  network text,
  tx_id text,
  address text,
  provider_status text,
  occurred_at timestamptz NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (venue, direction, provider_id)
);

CREATE INDEX cex_foreign_transfers_recent ON cex_foreign_transfers (occurred_at DESC, id DESC);

-- Down Migration
DROP TABLE IF EXISTS cex_foreign_transfers;
