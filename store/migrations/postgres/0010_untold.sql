-- Facts routed to Unrecorded sinks only (payhook serve's default log
-- sink), written without a delivery row: one row here each, in the fact's
-- transaction, deleted once the fact is told after the commit
-- (outbox.Outbox.Tell). A row left here SweepAge after created_at (a crash
-- between the commit and the telling, a sink that failed) is routed by the
-- sweep as deliveries of their own, retried as any: at least once.
CREATE TABLE payhook_untold (
    fact        BIGINT      PRIMARY KEY,
    created_at  TIMESTAMPTZ NOT NULL
);
