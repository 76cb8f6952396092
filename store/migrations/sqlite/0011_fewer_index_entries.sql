-- Fewer index entries per event and per order. An event is inserted once and marked
-- processed once, and an update that changes status writes a new entry
-- in every index of the row on PostgreSQL (no HOT update), in every index
-- holding status on SQLite:
--   - the unique index leads with event_id, so that it also finds an
--     event by its provider id alone (the console's search), in place of
--     an index of its own; an order's likewise with order_id;
--   - the indexes holding status keep only the events not processed:
--     those the sweep, the console's status filters and the metrics look
--     for. A processed event leaves them (the console lists processed
--     events newest first by id, nearly all of them are). Each condition
--     is written as ORs of equalities, the form SQLite's planner can match
--     to a query's "status = '...'".
CREATE UNIQUE INDEX payhook_events_event_id_source ON payhook_events (event_id, source);
DROP INDEX payhook_events_source_event_id;
DROP INDEX payhook_events_event_id;
CREATE INDEX payhook_events_received_enqueued_at ON payhook_events (enqueued_at) WHERE status = 'received';
DROP INDEX payhook_events_status_enqueued_at;
CREATE INDEX payhook_events_unprocessed_status_id ON payhook_events (status, id)
    WHERE status = 'received' OR status = 'failed' OR status = 'ignored';
DROP INDEX payhook_events_status_id;

CREATE UNIQUE INDEX payhook_orders_order_id_source ON payhook_orders (order_id, source);
DROP INDEX payhook_orders_source_order_id;
DROP INDEX payhook_orders_order_id;
