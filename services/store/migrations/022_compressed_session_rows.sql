-- Session and event rows are compressed again past about 2 kB, where the server compresses with
-- lz4 (021). 015 kept them inline uncompressed up to a page, when compression was pglz and cost
-- 9% of the server's CPU. With lz4 (measured with `npm run bench:api`, PostgreSQL's CPU per update
-- unchanged) a session row of a 5-line cart and 10 campaigns' effects goes from about 5.4 to
-- 1.9 kB and an event from 1.7 to 1.1 kB: WAL per update from about 7 to 4.7 kB, and the session
-- table a quarter of the size. An uncompressed session row took more than half a page, so no
-- update could put the new version beside the old one (a HOT update): every update moved the row
-- to another page and added an entry to each of the table's indexes. PGlite and servers without
-- lz4 keep 015's setting.
DO $$
BEGIN
  IF (SELECT attcompression FROM pg_attribute WHERE attrelid = 'customer_sessions'::regclass AND attname = 'effects') = 'l' THEN
    ALTER TABLE customer_sessions RESET (toast_tuple_target);
    ALTER TABLE events RESET (toast_tuple_target);
  END IF;
END $$;
