-- Coupons, referrals, limit counters, returns and idempotency keys of the Integration API.

-- Codes are stored as the Application's caseSensitivity makes them (upper- or lower-cased for
-- the insensitive settings), so one unique index keeps them unique under that setting.
CREATE TABLE coupons (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  campaign_id integer NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  created timestamptz NOT NULL DEFAULT now(),
  value text NOT NULL,
  usage_limit integer NOT NULL DEFAULT 0,
  usage_counter integer NOT NULL DEFAULT 0,
  discount_limit numeric NOT NULL DEFAULT 0,
  discount_counter numeric NOT NULL DEFAULT 0,
  reservation_limit integer NOT NULL DEFAULT 0,
  reservation_counter integer NOT NULL DEFAULT 0,
  start_date timestamptz,
  expiry_date timestamptz,
  limits jsonb NOT NULL DEFAULT '[]'::jsonb,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  referral_id bigint,
  recipient_integration_id text NOT NULL DEFAULT '',
  import_id integer,
  reservation boolean NOT NULL DEFAULT true,
  is_reservation_mandatory boolean NOT NULL DEFAULT false,
  batch_id text NOT NULL DEFAULT '',
  -- Who made it: management_api or rule_engine (then the session that created it).
  created_by text NOT NULL DEFAULT 'management_api',
  created_in_session text NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX coupons_value ON coupons (application_id, value);
CREATE INDEX coupons_campaign ON coupons (campaign_id, id);
CREATE INDEX coupons_batch ON coupons (application_id, batch_id) WHERE batch_id <> '';

CREATE TABLE referrals (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  campaign_id integer NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  created timestamptz NOT NULL DEFAULT now(),
  code text NOT NULL,
  advocate_profile_integration_id text NOT NULL,
  friend_profile_integration_id text NOT NULL DEFAULT '',
  start_date timestamptz,
  expiry_date timestamptz,
  usage_limit integer NOT NULL DEFAULT 0,
  usage_counter integer NOT NULL DEFAULT 0,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  batch_id text NOT NULL DEFAULT '',
  import_id integer,
  created_by text NOT NULL DEFAULT 'integration_api',
  created_in_session text NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX referrals_code ON referrals (application_id, code);
CREATE INDEX referrals_campaign ON referrals (campaign_id, id);
CREATE INDEX referrals_advocate ON referrals (application_id, advocate_profile_integration_id);

-- A friend is referred once per campaign: the key makes two racing sessions end with one.
CREATE TABLE referral_redemptions (
  campaign_id integer NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  friend_profile_integration_id text NOT NULL,
  referral_id bigint NOT NULL REFERENCES referrals(id) ON DELETE CASCADE,
  application_id integer NOT NULL,
  session_id text NOT NULL,
  created timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (campaign_id, friend_profile_integration_id)
);

-- What the campaign and coupon `limits` have used in each period, per entity (rules.md 6.4).
-- coupon_id 0: a campaign limit. period '': the whole life of the limit. entity '': not per
-- profile or identifier.
CREATE TABLE limit_counters (
  campaign_id integer NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  coupon_id bigint NOT NULL DEFAULT 0,
  action text NOT NULL,
  period text NOT NULL DEFAULT '',
  entity text NOT NULL DEFAULT '',
  counter numeric NOT NULL DEFAULT 0,
  PRIMARY KEY (campaign_id, coupon_id, action, period, entity)
);

-- Campaign statistics change with every close: each commit appends its change here (appends never
-- wait on each other) and the changes are folded into campaigns in the background and before reads.
CREATE TABLE campaign_stat_deltas (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  campaign_id integer NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  coupons integer NOT NULL DEFAULT 0,
  referrals integer NOT NULL DEFAULT 0,
  discount numeric NOT NULL DEFAULT 0,
  discount_effects integer NOT NULL DEFAULT 0,
  created_coupons integer NOT NULL DEFAULT 0,
  last_activity timestamptz
);
CREATE INDEX campaign_stat_deltas_campaign ON campaign_stat_deltas (campaign_id);

-- Returns with runRuleEngine=true evaluate again only the campaigns that ask for it.
ALTER TABLE campaigns ADD COLUMN reevaluate_on_return boolean NOT NULL DEFAULT false;

-- Sessions and profiles are updated in place many times: room left on each page lets PostgreSQL
-- keep a new version beside the old one without touching the indexes (HOT updates).
ALTER TABLE customer_sessions SET (fillfactor = 70);
ALTER TABLE customer_profiles SET (fillfactor = 80);

-- Effects committed by a session (on close, or at once for profile updates and events) and not
-- yet rolled back: what cancel, returns and reopen undo.
ALTER TABLE customer_sessions ADD COLUMN committed_effects jsonb NOT NULL DEFAULT '[]'::jsonb;
-- The limit counters that the committed effects incremented, so a rollback gives back exactly those.
ALTER TABLE customer_sessions ADD COLUMN committed_counters jsonb NOT NULL DEFAULT '[]'::jsonb;

CREATE TABLE session_returns (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  session_id text NOT NULL,
  created timestamptz NOT NULL DEFAULT now(),
  returned_cart_items jsonb NOT NULL,
  amount numeric NOT NULL DEFAULT 0,
  effects jsonb NOT NULL DEFAULT '[]'::jsonb
);
CREATE INDEX session_returns_session ON session_returns (application_id, session_id, id);

-- Idempotency-Key: the response of a v2 write, replayed for 24 hours.
CREATE TABLE idempotency_keys (
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  key text NOT NULL,
  operation text NOT NULL,
  request_hash text NOT NULL,
  status integer NOT NULL,
  response jsonb NOT NULL,
  created timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (application_id, key)
);

-- Custom attributes (Management): an event type may be tracked once an attribute of entity
-- Event defines it.
CREATE TABLE attributes (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  created timestamptz NOT NULL DEFAULT now(),
  modified timestamptz NOT NULL DEFAULT now(),
  entity text NOT NULL,
  event_type text NOT NULL DEFAULT '',
  name text NOT NULL,
  title text NOT NULL DEFAULT '',
  type text NOT NULL,
  description text NOT NULL DEFAULT '',
  editable boolean NOT NULL DEFAULT true,
  locked boolean NOT NULL DEFAULT false,
  tags jsonb NOT NULL DEFAULT '[]'::jsonb,
  subscribed_applications_ids jsonb,
  last_used timestamptz,
  last_used_application_id integer
);
CREATE UNIQUE INDEX attributes_name ON attributes (account_id, entity, event_type, name);
