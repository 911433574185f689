-- IDs of any length (issue 6). A session ID has no length limit (service-spec, Limits), but a
-- B-tree index entry holds about 2,700 bytes: a session with a longer ID could not be stored (a
-- 500). Every index that holds a session ID now keys it on a hash of it: a SHA-256 where the index
-- must be unique, a hash index where it need not. Lookups compare the ID itself as well, so they
-- stay exact. A limit counter's entity (profile ID, session identifier and coupon code together)
-- is keyed the same way. Profile IDs keep plain indexes: their length is limited by the API.

-- SHA-256 of a text's bytes (in the database's encoding, UTF-8). convert_to() is only STABLE,
-- which a generated column or an index may not use; decode(..., 'escape') gives back the same
-- bytes once every backslash is doubled, with IMMUTABLE functions only, so the planner inlines
-- this and a lookup costs one hash.
CREATE FUNCTION text_sha256(t text) RETURNS bytea LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT sha256(decode(replace(t, E'\\', E'\\\\'), 'escape')) $$;

-- Unique per Application: what a new session's insert conflicts on (ON CONFLICT names these
-- columns). Computed on insert only; updates never change a session's ID, so they stay HOT.
ALTER TABLE customer_sessions ADD COLUMN integration_id_hash bytea NOT NULL GENERATED ALWAYS AS (text_sha256(integration_id)) STORED;
ALTER TABLE customer_sessions DROP CONSTRAINT customer_sessions_application_id_integration_id_key;
ALTER TABLE customer_sessions ADD CONSTRAINT customer_sessions_integration_id UNIQUE (application_id, integration_id_hash);

-- Events and returns are found by their session with `session_id = $x`, as before.
DROP INDEX events_session;
CREATE INDEX events_session ON events USING hash (session_id);
DROP INDEX session_returns_session;
CREATE INDEX session_returns_session ON session_returns USING hash (session_id);

ALTER TABLE limit_counters ADD COLUMN entity_hash bytea NOT NULL GENERATED ALWAYS AS (text_sha256(entity)) STORED;
ALTER TABLE limit_counters DROP CONSTRAINT limit_counters_pkey;
ALTER TABLE limit_counters ADD CONSTRAINT limit_counters_pkey PRIMARY KEY (campaign_id, coupon_id, action, period, entity_hash);

-- An audience's integrationId may be 1,000 characters (spec, Limits) and its platform name as
-- long: up to 8,000 bytes of UTF-8, past what the unique index held.
DROP INDEX audiences_integration_id;
CREATE UNIQUE INDEX audiences_integration_id ON audiences (account_id, text_sha256(coalesce(integration, '')), text_sha256(integration_id))
  WHERE integration_id IS NOT NULL;
