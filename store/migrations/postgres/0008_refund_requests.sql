-- One row per refund payhook asked a provider for (payhook payments
-- refund), written before the call: its idempotency key is fixed here, so
-- a second run or a retry after a crash sends the same key and the
-- provider refunds once. seq numbers the refunds of one payment from 1;
-- status is pending (written, maybe sent, answer not recorded), completed
-- (the provider accepted: provider_ref is its refund) or failed (the
-- provider refused: error says why). Times are RFC 3339 in UTC. The
-- unique indexes decide between concurrent runs.
CREATE TABLE payhook_refund_requests (
    source       TEXT NOT NULL,
    payment      TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    idem_key     TEXT NOT NULL,
    amount       BIGINT NOT NULL,
    currency     TEXT NOT NULL,
    reason       TEXT NOT NULL DEFAULT '',
    status       TEXT NOT NULL DEFAULT 'pending',
    provider_ref TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT '',
    attempts     INTEGER NOT NULL DEFAULT 0,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (source, payment, seq)
);
CREATE UNIQUE INDEX payhook_refund_requests_key ON payhook_refund_requests (idem_key);
