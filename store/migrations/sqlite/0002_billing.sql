-- Times are fixed-width UTC text (store.TimeValue), so comparing them
-- orders them like time.
-- Billing state: payments, a double-entry ledger, subscriptions, orders and
-- alerts. Every rule that must hold under duplicates, concurrency and any
-- delivery order is a unique index here; the code only reacts to what the
-- index or a conditional UPDATE decided.

-- One row per provider payment reference of a source. Fiat: succeeded,
-- partially_refunded, refunded, charged_back (derived from the ledger).
-- Crypto: settled (credited) or rejected (never credited).
CREATE TABLE payhook_payments (
    id              INTEGER     PRIMARY KEY AUTOINCREMENT,
    source          TEXT        NOT NULL,
    ref             TEXT        NOT NULL,
    kind            TEXT        NOT NULL CHECK (kind IN ('fiat', 'crypto')),
    order_id        TEXT        NOT NULL DEFAULT '',
    amount          INTEGER     NOT NULL,
    currency        TEXT        NOT NULL,
    status          TEXT        NOT NULL CHECK (status IN ('succeeded', 'partially_refunded', 'refunded',
                                    'charged_back', 'settled', 'rejected')),
    refunded_amount INTEGER     NOT NULL DEFAULT 0,
    chain_ref       TEXT,
    captured_at     TEXT,
    created_at      TEXT        NOT NULL,
    updated_at      TEXT        NOT NULL
);
CREATE UNIQUE INDEX payhook_payments_source_ref ON payhook_payments (source, ref);
-- A chain reference credits at most one invoice of a source: the second
-- settlement that uses it conflicts here and is stored as rejected.
CREATE UNIQUE INDEX payhook_payments_credited_chain_ref ON payhook_payments (source, chain_ref)
    WHERE status = 'settled';
CREATE INDEX payhook_payments_order_id ON payhook_payments (source, order_id);

-- One posting per business fact (fact_key such as capture:<ref>,
-- refund:<refund_ref>, chargeback:<dispute_ref>). reverses_id points at the
-- posting it reverses. amount is what the posting's entries move, signed,
-- on the receivable side (provider_receivable for fiat, crypto_wallet for
-- crypto): the sum of its entries on that account, 0 when it moves nothing
-- (a refund reported after its payment was charged back). requested_amount
-- is the amount the fact names (the capture, the refund, the refund a
-- failure cancels, the payment a chargeback takes back), always >= 0.
CREATE TABLE payhook_ledger_postings (
    id               INTEGER     PRIMARY KEY AUTOINCREMENT,
    source           TEXT        NOT NULL,
    fact_key         TEXT        NOT NULL,
    kind             TEXT        NOT NULL CHECK (kind IN ('capture', 'refund', 'refund_failed', 'chargeback',
                                     'chargeback_won', 'settle')),
    payment_ref      TEXT        NOT NULL,
    reverses_id      INTEGER     REFERENCES payhook_ledger_postings (id),
    amount           INTEGER     NOT NULL,
    requested_amount INTEGER     NOT NULL CHECK (requested_amount >= 0),
    currency         TEXT        NOT NULL,
    posted_at        TEXT        NOT NULL
);
CREATE UNIQUE INDEX payhook_ledger_postings_source_fact_key ON payhook_ledger_postings (source, fact_key);
CREATE INDEX payhook_ledger_postings_payment ON payhook_ledger_postings (source, payment_ref);
CREATE INDEX payhook_ledger_postings_reverses_id ON payhook_ledger_postings (reverses_id);

-- Signed amounts in minor units; the entries of a posting sum to zero.
CREATE TABLE payhook_ledger_entries (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    posting_id INTEGER NOT NULL REFERENCES payhook_ledger_postings (id),
    account    TEXT   NOT NULL,
    currency   TEXT   NOT NULL,
    amount     INTEGER NOT NULL
);
CREATE INDEX payhook_ledger_entries_posting_id ON payhook_ledger_entries (posting_id);

CREATE TABLE payhook_subscriptions (
    id                  INTEGER     PRIMARY KEY AUTOINCREMENT,
    source              TEXT        NOT NULL,
    ref                 TEXT        NOT NULL,
    customer            TEXT        NOT NULL DEFAULT '',
    plan                TEXT        NOT NULL DEFAULT '',
    status              TEXT        NOT NULL DEFAULT '',
    current_period_end  TEXT,
    -- The provider's time of the snapshot stored; older snapshots are ignored.
    provider_updated_at TEXT,
    -- NULL until the end is claimed, once.
    ended_at            TEXT,
    created_at          TEXT        NOT NULL,
    updated_at          TEXT        NOT NULL
);
CREATE UNIQUE INDEX payhook_subscriptions_source_ref ON payhook_subscriptions (source, ref);

-- The application's orders, as payhook heard of them, per source: the same
-- order id in two sources (a test and a live account) is two orders.
CREATE TABLE payhook_orders (
    id         INTEGER     PRIMARY KEY AUTOINCREMENT,
    source     TEXT        NOT NULL,
    order_id   TEXT        NOT NULL,
    status     TEXT        NOT NULL CHECK (status IN ('pending', 'paid')),
    paid_by    TEXT        NOT NULL DEFAULT '',
    paid_at    TEXT,
    created_at TEXT        NOT NULL
);
CREATE UNIQUE INDEX payhook_orders_source_order_id ON payhook_orders (source, order_id);
CREATE INDEX payhook_orders_order_id ON payhook_orders (order_id);

-- One row per (kind, subject); raising it again counts.
CREATE TABLE payhook_alerts (
    id           INTEGER     PRIMARY KEY AUTOINCREMENT,
    kind         TEXT        NOT NULL,
    subject      TEXT        NOT NULL,
    message      TEXT        NOT NULL DEFAULT '',
    first_seen   TEXT        NOT NULL,
    last_seen    TEXT        NOT NULL,
    count        INTEGER     NOT NULL DEFAULT 1,
    acknowledged INTEGER     NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX payhook_alerts_kind_subject ON payhook_alerts (kind, subject);
-- What raised each alert, once: an alert counts one more only when this
-- index takes a new occurrence (a second payment of an order, a snapshot
-- disagreeing with its payment...), never when a duplicate or a replay of
-- the same event repeats it.
CREATE TABLE payhook_alert_occurrences (
    id         INTEGER     PRIMARY KEY AUTOINCREMENT,
    kind       TEXT        NOT NULL,
    subject    TEXT        NOT NULL,
    occurrence TEXT        NOT NULL,
    seen_at    TEXT        NOT NULL
);
CREATE UNIQUE INDEX payhook_alert_occurrences_key ON payhook_alert_occurrences (kind, subject, occurrence);
