-- Up Migration
-- The treasury policy at dispatch (docs/policy.md, "Checked again at dispatch"): the movements the
-- dispatcher let through the velocity limits, one row per movement, written in the same transaction
-- that records its first node's SUBMITTING, under the advisory lock of each limit's sum. The sums
-- at dispatch read these rows: a movement counts from its first dispatch on.
CREATE TABLE policy_velocity_dispatches (
  movement_id        uuid PRIMARY KEY REFERENCES movement_requests (id) ON DELETE CASCADE,
  rule_set_version   integer NOT NULL,
  asset              text NOT NULL,
  amount             numeric NOT NULL,
  destination        text,
  destination_entry  text,
  dispatched_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX policy_velocity_dispatches_window ON policy_velocity_dispatches (asset, dispatched_at);

-- Down Migration
DROP TABLE IF EXISTS policy_velocity_dispatches;
