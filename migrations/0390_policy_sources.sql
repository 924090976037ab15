-- Up Migration
-- The treasury policy reads a movement's sources (docs/policy.md, "Rules"): the signer keys and
-- accounts its nodes move funds from. A movement records them at creation, and the dispatcher
-- records them beside each movement it counts, so velocity limits can keep one sum per source
-- (per requester, the sums read movement_requests.created_by). Null on rows from before: such a
-- movement counts in no per-source sum.
ALTER TABLE movement_requests ADD COLUMN policy_sources text[];
ALTER TABLE policy_velocity_dispatches ADD COLUMN sources text[];

-- Down Migration
ALTER TABLE policy_velocity_dispatches DROP COLUMN IF EXISTS sources;
ALTER TABLE movement_requests DROP COLUMN IF EXISTS policy_sources;
