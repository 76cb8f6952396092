-- What a reconcile run left unchecked: the objects past its cap on
-- retrieves (reconcile.Config.MaxRetrieves), neither compared nor reported
-- as differences. A run with 0 differences and some unchecked did not see
-- everything. A column with a default: an older payhook, which names the
-- columns it reads and writes, is correct on this schema.
ALTER TABLE payhook_reconcile_runs ADD COLUMN unchecked BIGINT NOT NULL DEFAULT 0;
