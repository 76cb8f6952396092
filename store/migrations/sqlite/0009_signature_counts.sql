-- Signature checks of webhook deliveries, counted per source and bucket
-- (a short span of time, its start in bucket) by each instance in memory
-- and added here by a periodic flush (store.AddSignatureCounts): a refused
-- delivery costs no commit of its own. Several instances add to the same
-- row. last_failure_at and last_verified_at are the latest failure and
-- match of the bucket. Rows older than a day are pruned by the check that
-- reads them, all but those holding the source's latest failure and match.
CREATE TABLE payhook_signature_counts (
    source           TEXT    NOT NULL,
    bucket           TEXT    NOT NULL,
    failures         INTEGER NOT NULL DEFAULT 0,
    verified         INTEGER NOT NULL DEFAULT 0,
    last_failure_at  TEXT,
    last_verified_at TEXT,
    PRIMARY KEY (source, bucket)
);
