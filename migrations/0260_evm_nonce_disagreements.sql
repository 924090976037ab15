-- Up Migration
-- When the EVM nonce reaper last reported a reservation the chain disagrees with (a nonce the chain
-- has not reached while later ones wait, or a reservation above the chain's pending nonce for longer
-- than FERRY_EVM_NONCE_DISAGREEMENT_SECONDS): attention is raised once per row, not at every run
-- (src/actors/evm-nonce-reaper.ts, docs/evm-lane.md "Chain state disagreements").
ALTER TABLE evm_nonce_reservations ADD COLUMN disagreement_reported_at timestamptz;

-- Down Migration
ALTER TABLE evm_nonce_reservations DROP COLUMN IF EXISTS disagreement_reported_at;
