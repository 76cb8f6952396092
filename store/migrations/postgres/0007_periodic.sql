-- One row per period of a periodic job (jobs.Periodic) that started: the
-- primary key decides which instance runs the period, so that a period
-- runs once even if River inserted its job twice (a change of leader, a
-- cancelled job). period is the period's start, RFC 3339 in UTC.
CREATE TABLE payhook_periodic_claims (
    name       TEXT NOT NULL,
    period     TEXT NOT NULL,
    claimed_at TEXT NOT NULL,
    PRIMARY KEY (name, period)
);
