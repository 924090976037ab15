-- Up Migration
-- The simulation lane picks each scripted outcome by how many calls of that kind a node has already
-- made, so it counts ledger rows per (node, call) on every call; without this index that count
-- scans the whole ledger, which grows with every benchmark run.
CREATE INDEX sim_side_effects_node_call ON sim_side_effects (request_node_id, call);

-- Down Migration
DROP INDEX IF EXISTS sim_side_effects_node_call;
