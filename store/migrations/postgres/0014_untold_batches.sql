-- Facts routed to Unrecorded sinks only (payhook serve's default log
-- sink), held by one row per statement that wrote them instead of one
-- row each in payhook_untold: a processing batch's facts, written
-- together, share a row (outbox.EmitMany). facts is the JSON array of
-- their payhook_facts ids. The row is deleted once they are told after
-- the commit (outbox.Outbox.Tell); a telling that reached only some of
-- them replaces it with a payhook_untold row per fact left, or a pending
-- delivery per sink left. A row left here SweepAge after created_at (a
-- crash between the commit and the telling, every sink failed) is routed
-- by the sweep: a delivery per fact and sink. payhook_untold stays for
-- those rows left and for the facts an older payhook writes during a
-- rolling upgrade; the sweep reads both.
CREATE TABLE payhook_untold_batches (
    id          BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    facts       TEXT        NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);

-- Every fact waiting to be told, a row each, whichever table holds it:
-- what the outbox's backlog counts, and what to check is empty before
-- rolling back past this version (docs/deploy.md).
CREATE VIEW payhook_untold_facts AS
    SELECT fact, created_at FROM payhook_untold
    UNION ALL
    SELECT CAST(j.value AS BIGINT), b.created_at
    FROM payhook_untold_batches b CROSS JOIN LATERAL jsonb_array_elements_text(CAST(b.facts AS JSONB)) AS j(value);
