-- Console sessions ended by a logout before their expiry. A session is a
-- signed cookie (console/auth.go); its nonce here refuses the cookie
-- even when it was copied before the logout. A row is kept until the
-- session would have expired (expires_at), then pruned by the next
-- logout.
CREATE TABLE payhook_console_logouts (
    nonce       TEXT    PRIMARY KEY,
    expires_at  TIMESTAMPTZ NOT NULL
);
