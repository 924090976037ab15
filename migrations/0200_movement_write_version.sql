-- Up Migration
-- The movement's write fence (docs/actor-runtime.md, step 2). Every statement that writes a
-- movement's machine state (the movement row or any of its nodes: persistence/group-commit.ts's
-- writeGroup) increments write_version in the same statement. A writer that still holds the rows of
-- its own last commit may write without re-reading them under a lock: its write carries the
-- write_version it read and is refused when the movement was written since. row_version stays the
-- movement machine's own sequence (the transition log's seq), which node writes do not move.
ALTER TABLE movement_requests ADD COLUMN write_version bigint NOT NULL DEFAULT 0;

-- Down Migration
ALTER TABLE movement_requests DROP COLUMN write_version;
