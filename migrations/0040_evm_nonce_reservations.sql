-- Up Migration
-- The EVM nonce manager: one row per nonce handed out per (chain, sender), with the node attempt it
-- belongs to. Many dispatchers in many processes share one hot wallet; this table, not the chain's
-- pending count, decides which nonce each attempt signs. See src/persistence/evm-nonces.ts for the
-- locking and docs/evm-lane.md for the lifecycle.
--
-- status:
--   reserved   held by an attempt that has not been cleared to broadcast yet;
--   broadcast  the attempt's signed bytes are durable and cleared to go to the chain (from here on
--              only those bytes, or a fee-bumped version of the same attempt, may use the nonce);
--   confirmed  the chain's count passed the nonce while the attempt held it as broadcast;
--   released   given back after a definite refusal; a later reservation may reuse the nonce;
--   filled     taken over by the nonce reaper (a zero-value self-transfer, filler_*), or found used
--              by a transaction Ferry did not send.
CREATE TABLE evm_nonce_reservations (
  id               bigserial PRIMARY KEY,
  chain_id         bigint NOT NULL CHECK (chain_id > 0),
  sender           text NOT NULL CHECK (sender ~ '^0x[0-9a-f]{40}$'),
  nonce            bigint NOT NULL CHECK (nonce >= 0),
  request_node_id  uuid NOT NULL,
  attempt_no       integer NOT NULL CHECK (attempt_no > 0),
  status           text NOT NULL CHECK (status IN ('reserved', 'broadcast', 'confirmed', 'released', 'filled')),
  tx_hash          text,
  filler_tx_hash   text,
  filler_raw       text,
  detail           text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  broadcast_at     timestamptz,
  -- Set once the chain's count is past the nonce (or the row is released): the reaper is done with it.
  closed_at        timestamptz
);

-- A nonce belongs to at most one live row per wallet; released rows are history and do not count.
CREATE UNIQUE INDEX evm_nonce_reservations_live ON evm_nonce_reservations (chain_id, sender, nonce)
  WHERE status <> 'released';
-- One live nonce per attempt and wallet: preparing the same attempt again returns the same nonce.
CREATE UNIQUE INDEX evm_nonce_reservations_attempt ON evm_nonce_reservations (request_node_id, attempt_no, chain_id, sender)
  WHERE status IN ('reserved', 'broadcast', 'confirmed');
-- Gaps to reuse (lowest first).
CREATE INDEX evm_nonce_reservations_released ON evm_nonce_reservations (chain_id, sender, nonce)
  WHERE status = 'released';
-- The reaper's walk: rows the chain has not settled yet.
CREATE INDEX evm_nonce_reservations_open ON evm_nonce_reservations (chain_id, sender, nonce)
  WHERE closed_at IS NULL AND status <> 'released';

-- Down Migration
DROP TABLE IF EXISTS evm_nonce_reservations;
