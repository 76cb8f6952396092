-- One row that /readyz rewrites: a committed write is the proof that the
-- database takes writes now (not locked up, not out of disk).
CREATE TABLE payhook_ready (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    probes    INTEGER NOT NULL DEFAULT 0,
    probed_at TEXT    NOT NULL
);
INSERT INTO payhook_ready (id, probed_at) VALUES (1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
