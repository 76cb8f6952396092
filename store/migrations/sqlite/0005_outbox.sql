-- The outbox: the facts billing tells the application, written in the
-- transaction of the billing change that made them (package outbox).
-- fact_id is derived from the business fact, so the unique index makes
-- each fact once however many times its event is delivered, replayed or
-- backfilled. body is the fact's JSON exactly as it is sent and signed.
-- routed: its deliveries (one per matching sink) exist; a fact written
-- by a transaction that knew no sinks is routed later by the sweep.
CREATE TABLE payhook_facts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    fact_id     TEXT    NOT NULL,
    type        TEXT    NOT NULL,
    source      TEXT    NOT NULL DEFAULT '',
    subject     TEXT    NOT NULL DEFAULT '',
    body        TEXT    NOT NULL,
    routed      BOOLEAN NOT NULL DEFAULT FALSE,
    created_at  TEXT    NOT NULL
);
CREATE UNIQUE INDEX payhook_facts_fact_id ON payhook_facts (fact_id);
CREATE INDEX payhook_facts_unrouted ON payhook_facts (id) WHERE NOT routed;

-- One delivery of a fact to one sink (or after-commit effect), retried
-- on its own. status: pending | delivered | failed | paused.
CREATE TABLE payhook_deliveries (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    fact         INTEGER NOT NULL REFERENCES payhook_facts (id),
    sink         TEXT    NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN ('pending', 'delivered', 'failed', 'paused')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT    NOT NULL DEFAULT '',
    created_at   TEXT    NOT NULL,
    updated_at   TEXT    NOT NULL,
    -- When a job was last enqueued for it; the sweep enqueues pending
    -- deliveries again long after.
    enqueued_at  TEXT,
    delivered_at TEXT
);
CREATE UNIQUE INDEX payhook_deliveries_fact_sink ON payhook_deliveries (fact, sink);
CREATE INDEX payhook_deliveries_status_enqueued_at ON payhook_deliveries (status, enqueued_at);
CREATE INDEX payhook_deliveries_sink_status ON payhook_deliveries (sink, status);

-- The delivery log: one row per attempt.
CREATE TABLE payhook_delivery_attempts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery    INTEGER NOT NULL REFERENCES payhook_deliveries (id),
    attempt     INTEGER NOT NULL,
    at          TEXT    NOT NULL,
    status_code INTEGER NOT NULL DEFAULT 0,
    response    TEXT    NOT NULL DEFAULT '',
    error       TEXT    NOT NULL DEFAULT '',
    latency_us  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX payhook_delivery_attempts_delivery ON payhook_delivery_attempts (delivery);

-- Sinks paused (an HTTP sink that answered 410 Gone), with the URL they
-- were paused for: a configuration that points the sink elsewhere, or a
-- resend, resumes it.
CREATE TABLE payhook_sinks_paused (
    sink      TEXT PRIMARY KEY,
    url       TEXT NOT NULL DEFAULT '',
    reason    TEXT NOT NULL DEFAULT '',
    paused_at TEXT NOT NULL
);
