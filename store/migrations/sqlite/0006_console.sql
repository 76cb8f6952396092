-- The console's event list: newest first (id DESC) under the usual
-- filters, and the per-minute chart and time ranges over received_at.
CREATE INDEX payhook_events_source_status_id ON payhook_events (source, status, id);
CREATE INDEX payhook_events_status_id ON payhook_events (status, id);
CREATE INDEX payhook_events_received_at ON payhook_events (received_at);
