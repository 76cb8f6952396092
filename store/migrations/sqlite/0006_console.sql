-- The console's event list, newest first (id DESC) under its filters,
-- stays fast with millions of events: by source, by status (the other
-- filter then checks rows in id order), by provider event id without its
-- source, and by time (the per-minute chart, since/until).
CREATE INDEX payhook_events_source_id ON payhook_events (source, id);
CREATE INDEX payhook_events_status_id ON payhook_events (status, id);
CREATE INDEX payhook_events_event_id ON payhook_events (event_id);
CREATE INDEX payhook_events_received_at ON payhook_events (received_at);
