-- Events as delivered: one row per (source, provider event id).
CREATE TABLE payhook_events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    source       TEXT    NOT NULL,
    event_id     TEXT    NOT NULL,
    type         TEXT    NOT NULL DEFAULT '',
    environment  TEXT    NOT NULL DEFAULT '',
    occurred_at  TEXT,
    received_at  TEXT    NOT NULL,
    payload      BLOB    NOT NULL,
    secret_id    TEXT    NOT NULL DEFAULT '',
    status       TEXT    NOT NULL CHECK (status IN ('received', 'processed', 'ignored', 'failed')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT    NOT NULL DEFAULT '',
    -- enqueued_at: when a job was last enqueued for the event; the sweep
    -- re-enqueues events still received long after it.
    enqueued_at  TEXT,
    processed_at TEXT
);
CREATE UNIQUE INDEX payhook_events_source_event_id ON payhook_events (source, event_id);
CREATE INDEX payhook_events_status_enqueued_at ON payhook_events (status, enqueued_at);
