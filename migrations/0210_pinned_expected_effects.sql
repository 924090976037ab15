-- Up Migration
-- The expected effect of a signing node, pinned when its movement is created from the approved plan
-- and Ferry's configuration of that moment (src/executors/evm/expected-effect.ts): the chain, the
-- recipient, the amount in base units with the token's decimals and symbol, the fee cap. Dispatch
-- signs against it, never against a configuration changed since (docs/signing.md, "Pinned at
-- approval"). {"effect": {...}} or {"unavailable": "<reason>"}; NULL for a node without a signer
-- binding, or one created before this column.
ALTER TABLE request_nodes ADD COLUMN expected_effect jsonb;

-- Down Migration
ALTER TABLE request_nodes DROP COLUMN IF EXISTS expected_effect;
