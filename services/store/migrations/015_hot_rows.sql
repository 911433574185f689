-- Session and event rows of a few KB are written on every session update. Past about 2 KB
-- PostgreSQL tries to compress them (pglz) before storing: measured at 9% of the server's CPU
-- under `npm run bench:api`, for rows that shrink little. Rows stay inline, uncompressed, up to
-- a page; larger ones are still toasted.
ALTER TABLE customer_sessions SET (toast_tuple_target = 8160);
ALTER TABLE events SET (toast_tuple_target = 8160);

-- The cart and the effects of a session, and the effects of an event, are written on every
-- update and read back whole; SQL never looks inside them on the hot path. As `json` they are
-- checked and stored as text: `jsonb` parsed them into its binary form and sorted every object's
-- keys on each write (a further 10% of the server's CPU). The few statements that edit cart items
-- in SQL cast to jsonb and back.
ALTER TABLE customer_sessions
  ALTER COLUMN cart_items DROP DEFAULT,
  ALTER COLUMN cart_items TYPE json USING cart_items::json,
  ALTER COLUMN cart_items SET DEFAULT '[]'::json,
  ALTER COLUMN effects DROP DEFAULT,
  ALTER COLUMN effects TYPE json USING effects::json,
  ALTER COLUMN effects SET DEFAULT '[]'::json,
  ALTER COLUMN committed_effects DROP DEFAULT,
  ALTER COLUMN committed_effects TYPE json USING committed_effects::json,
  ALTER COLUMN committed_effects SET DEFAULT '[]'::json,
  ALTER COLUMN committed_counters DROP DEFAULT,
  ALTER COLUMN committed_counters TYPE json USING committed_counters::json,
  ALTER COLUMN committed_counters SET DEFAULT '[]'::json;
ALTER TABLE events
  ALTER COLUMN effects DROP DEFAULT,
  ALTER COLUMN effects TYPE json USING effects::json,
  ALTER COLUMN effects SET DEFAULT '[]'::json;
