-- Up Migration
-- The approval-time window of a velocity limit (docs/policy.md, "Velocity limits"): a movement
-- counts from the approval that reached its quorum, the last entry of `approvals`. The sums read
-- that time through this function, and the index below lets a window's sum read only the movements
-- approved inside it, per asset, instead of every movement of the asset.
--
-- IMMUTABLE holds for Ferry's rows: every approval time is written as an ISO 8601 string with its
-- offset (toISOString, "Z"), so the cast does not depend on the session's TimeZone.
CREATE FUNCTION ferry_last_approval_at(approvals jsonb) RETURNS timestamptz
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT (approvals -> -1 ->> 'at')::timestamptz $$;

-- The same rows as movement_requests_velocity (0250): movements of an asset past approval.
CREATE INDEX movement_requests_policy_window ON movement_requests (policy_asset, ferry_last_approval_at(approvals))
  WHERE policy_asset IS NOT NULL
    AND request_state IN ('APPROVED', 'EXECUTING', 'WAITING_MANUAL_ACTION', 'MANUAL_INTERVENTION', 'COMPLETED');

-- Down Migration
DROP INDEX IF EXISTS movement_requests_policy_window;
DROP FUNCTION IF EXISTS ferry_last_approval_at(jsonb);
