-- How each event came: a webhook delivery (signed) or a backfill from the
-- provider's events API (trusted through the API key).
ALTER TABLE payhook_events ADD COLUMN received_via TEXT NOT NULL DEFAULT 'webhook'
    CHECK (received_via IN ('webhook', 'backfill'));

-- One row per backfill or reconcile run of a source. A run lists one
-- window [window_from, window_until]; cursor is where its listing stands
-- (the provider's cursor after the last page whose events are stored), so
-- that a run cut short (finished_at NULL, or error set) is resumed from it.
-- resumed_by claims the run for the one run that resumes it.
CREATE TABLE payhook_reconcile_runs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    kind         TEXT    NOT NULL CHECK (kind IN ('backfill', 'reconcile')),
    source       TEXT    NOT NULL,
    -- What the run lists besides its window: its filters (event types,
    -- undelivered only), so that only a run of the same filters resumes it.
    params       TEXT    NOT NULL DEFAULT '',
    window_from  TEXT,
    window_until TEXT,
    started_at   TEXT    NOT NULL,
    updated_at   TEXT    NOT NULL,
    finished_at  TEXT,
    listed       INTEGER NOT NULL DEFAULT 0,
    new          INTEGER NOT NULL DEFAULT 0,
    known        INTEGER NOT NULL DEFAULT 0,
    refused      INTEGER NOT NULL DEFAULT 0,
    differences  INTEGER NOT NULL DEFAULT 0,
    error        TEXT    NOT NULL DEFAULT '',
    cursor       TEXT    NOT NULL DEFAULT '',
    resumes      INTEGER REFERENCES payhook_reconcile_runs (id),
    resumed_by   INTEGER REFERENCES payhook_reconcile_runs (id)
);
CREATE INDEX payhook_reconcile_runs_source_kind ON payhook_reconcile_runs (source, kind, id);
