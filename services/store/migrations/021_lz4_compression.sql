-- The large values written on every session update (the cart and effects of a session, the
-- effects of its events, the payloads of its access log entry) are compressed with lz4 where the
-- server has it: PostgreSQL's default (pglz) costs several times the CPU for about the same size.
-- Existing values keep their compression until they are written again. A server built without
-- lz4 (and PGlite) keeps pglz.
DO $$
BEGIN
  ALTER TABLE customer_sessions
    ALTER COLUMN cart_items SET COMPRESSION lz4,
    ALTER COLUMN effects SET COMPRESSION lz4,
    ALTER COLUMN committed_effects SET COMPRESSION lz4,
    ALTER COLUMN committed_counters SET COMPRESSION lz4;
  ALTER TABLE events ALTER COLUMN effects SET COMPRESSION lz4;
  ALTER TABLE access_logs
    ALTER COLUMN request_payload SET COMPRESSION lz4,
    ALTER COLUMN response_payload SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
  NULL;
END $$;
