-- Up Migration
-- Node callbacks: a registered destination can ask, when it is created, for a callback on every
-- node state change too (node_events). A movement that names it copies the choice (node_callbacks),
-- so the transition function knows from the movement row alone whether a node change owes one.
ALTER TABLE callback_destinations ADD COLUMN node_events boolean NOT NULL DEFAULT false;
ALTER TABLE movement_requests ADD COLUMN node_callbacks boolean NOT NULL DEFAULT false;

-- Down Migration
ALTER TABLE movement_requests DROP COLUMN IF EXISTS node_callbacks;
ALTER TABLE callback_destinations DROP COLUMN IF EXISTS node_events;
