-- Up Migration
-- Registry drift (src/actors/verify-drift.ts): on-chain facts a lane's configuration asserts (a
-- token's decimals, a CCTP transmitter's domain, an OFT's peer, a bridge's code) that the chain
-- contradicts. One row per episode: a drift seen again moves last_seen; one no longer seen (the
-- chain or the configuration fixed) is resolved; seen once more later, it is a new row.
CREATE TABLE registry_drifts (
  id bigserial PRIMARY KEY,
  -- The lane whose configuration asserts the fact (src/executors/lanes.ts).
  lane text NOT NULL,
  chain_id bigint NOT NULL,
  -- What is checked (evm.tokens[USDC]) and which of its properties (code, decimals(), peers(30110)).
  subject text NOT NULL,
  property text NOT NULL,
  address text NOT NULL,
  expected text NOT NULL,
  observed text NOT NULL,
  first_seen timestamptz NOT NULL DEFAULT now(),
  last_seen timestamptz NOT NULL DEFAULT now(),
  resolved_at timestamptz,
  -- matched: the chain agrees with the configuration again; unconfigured: nothing asserts it any more.
  resolution text CHECK (resolution IN ('matched', 'unconfigured')),
  CHECK ((resolved_at IS NULL) = (resolution IS NULL))
);

-- At most one open episode per checked fact.
CREATE UNIQUE INDEX registry_drifts_open ON registry_drifts (lane, chain_id, subject, property) WHERE resolved_at IS NULL;
CREATE INDEX registry_drifts_recent ON registry_drifts (last_seen DESC, id DESC);

-- The latest answer for every checked fact: match, drift, or unverified (the chain did not answer in
-- time, or answered something unreadable: neither agreement nor drift).
CREATE TABLE registry_checks (
  lane text NOT NULL,
  chain_id bigint NOT NULL,
  subject text NOT NULL,
  property text NOT NULL,
  address text NOT NULL,
  expected text NOT NULL,
  outcome text NOT NULL CHECK (outcome IN ('match', 'drift', 'unverified')),
  observed text,
  -- Why it is unverified (RPC_TIMEOUT, RPC_ERROR, RPC_ANSWER_TOO_LARGE, ...).
  error_code text,
  checked_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (lane, chain_id, subject, property)
);

-- Down Migration
DROP TABLE IF EXISTS registry_checks;
DROP TABLE IF EXISTS registry_drifts;
