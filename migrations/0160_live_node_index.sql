-- Up Migration
-- Live nodes are found through their movement, by one index on (request_id, node_state), instead of
-- one partial index per live state.
--
-- Why. The partial indexes (READY, in dispatch, observable, recoverable) hold only the live slice of
-- a table that is mostly history. Statistics of that slice go stale: ANALYZE (or autovacuum, which
-- analyzes a table only after 10% of it changed, i.e. rarely once the history is large) last saw
-- the slice nearly empty, so the planner estimates one row in it. With one row estimated on both
-- sides, it joined the active movements to an unparameterised scan of the whole partial index
-- (Nested Loop, Join Filter r.id = n.request_id): active x live rows per claim. With 100,000
-- finished movements and a backlog of 1,000 approved ones the dispatch claim took 2-3 s and the
-- observe claim 340 ms (docs/scaling.md, "History"). With the composite index, the only way to
-- reach live nodes is a probe per movement (request_id = r.id AND node_state ...), so a claim costs
-- at most a probe per active movement whatever the statistics say.
--
-- request_nodes_request (request_id) goes too: the unique index on (request_id, node_key) and the
-- new one both start with request_id. Every non-HOT update of a node writes an entry into each
-- index whose predicate it matches, so fewer indexes is less work on every transition.
CREATE INDEX request_nodes_request_state ON request_nodes (request_id, node_state);
DROP INDEX IF EXISTS request_nodes_ready;
DROP INDEX IF EXISTS request_nodes_in_dispatch;
DROP INDEX IF EXISTS request_nodes_observable_by_request;
DROP INDEX IF EXISTS request_nodes_recoverable;
DROP INDEX IF EXISTS request_nodes_request;

-- Down Migration
CREATE INDEX IF NOT EXISTS request_nodes_request ON request_nodes (request_id);
CREATE INDEX IF NOT EXISTS request_nodes_recoverable ON request_nodes (updated_at)
  WHERE node_state IN ('UNKNOWN', 'SUBMITTING');
CREATE INDEX IF NOT EXISTS request_nodes_observable_by_request ON request_nodes (request_id)
  WHERE node_state IN ('SUBMITTED', 'OBSERVING');
CREATE INDEX IF NOT EXISTS request_nodes_in_dispatch ON request_nodes (request_id)
  WHERE node_state IN ('PREPARING', 'AWAITING_SIGNATURE', 'SUBMITTING');
CREATE INDEX IF NOT EXISTS request_nodes_ready ON request_nodes (request_id) WHERE node_state = 'READY';
DROP INDEX IF EXISTS request_nodes_request_state;
