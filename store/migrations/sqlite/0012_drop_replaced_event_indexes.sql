-- Fewer index entries per event, step 2 of 2: the indexes 0011 replaced.
-- No statement names an index, so an older payhook is correct without
-- them. On PostgreSQL a DROP INDEX waits for the transactions using
-- payhook_events to end and holds the table a moment: alone in its
-- transaction, it holds nothing an older instance's batch could wait for.
-- IF EXISTS: a database that applied the first version of 0011 (on main
-- for an hour, 38bad99) has dropped them already.
DROP INDEX IF EXISTS payhook_events_source_event_id;
DROP INDEX IF EXISTS payhook_events_event_id;
DROP INDEX IF EXISTS payhook_events_status_enqueued_at;
DROP INDEX IF EXISTS payhook_events_status_id;
