-- Fewer index entries per event, step 1 of 2: the indexes that replace
-- four of payhook_events' (0012 drops those). An event is inserted once
-- and marked processed once, and marking it changes status: on PostgreSQL
-- a non-HOT update that writes a new entry in every index of the row, on
-- SQLite a move in every index holding status.
--   - The unique index leads with event_id: the same constraint as
--     (source, event_id), which ON CONFLICT (source, event_id) matches,
--     and it also finds an event by its provider id alone (the console's
--     search), in place of an index of its own.
--   - The indexes holding status keep only the events not processed:
--     those the sweep, the console's status filters and the metrics look
--     for. A processed event leaves them; the console lists processed
--     events newest first by id. Each condition is written as ORs of
--     equalities, the form SQLite's planner matches to a query's
--     "status = '...'", and the sweep's index keeps status as its first
--     column so that SQLite, which payhook never ANALYZEs, still prefers
--     it for "status = 'received' ... ORDER BY enqueued_at".
-- Only payhook_events here, and only creations: on PostgreSQL this takes
-- the table's SHARE lock (inserts and updates wait for the builds), and a
-- transaction that also locked another table, or dropped an index, could
-- deadlock with an older instance's batch during a rolling upgrade.
CREATE UNIQUE INDEX payhook_events_event_id_source ON payhook_events (event_id, source);
CREATE INDEX payhook_events_received_enqueued_at ON payhook_events (status, enqueued_at)
    WHERE status = 'received';
CREATE INDEX payhook_events_unprocessed_status_id ON payhook_events (status, id)
    WHERE status = 'received' OR status = 'failed' OR status = 'ignored';
