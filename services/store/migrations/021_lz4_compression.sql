-- The large values written on session updates are compressed with lz4 where the server has it:
-- PostgreSQL's default (pglz) costs several times the CPU for about the same size. The payloads
-- of every access log entry are (a session update's answer is past the 2 kB threshold); the cart
-- and effects of sessions and events only in rows past a page (015_hot_rows). Existing values
-- keep their compression until they are written again. A server built without lz4 (and PGlite)
-- keeps pglz.
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
