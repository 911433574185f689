-- Accounts, users and Management API tokens.
CREATE TABLE accounts (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  created timestamptz NOT NULL DEFAULT now(),
  modified timestamptz NOT NULL DEFAULT now(),
  company_name text NOT NULL DEFAULT '',
  billing_email text NOT NULL DEFAULT '',
  domain_name text NOT NULL DEFAULT '',
  plan_name text NOT NULL DEFAULT 'self-hosted',
  state text NOT NULL DEFAULT 'active'
);

CREATE TABLE users (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  created timestamptz NOT NULL DEFAULT now(),
  modified timestamptz NOT NULL DEFAULT now(),
  last_activity timestamptz,
  email text NOT NULL,
  name text NOT NULL DEFAULT '',
  password_hash text NOT NULL,
  policy jsonb NOT NULL DEFAULT '{}'::jsonb,
  release_update boolean NOT NULL DEFAULT false,
  state text NOT NULL DEFAULT 'active'
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE management_tokens (
  token_hash text PRIMARY KEY,
  user_id integer NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  created timestamptz NOT NULL DEFAULT now(),
  expires timestamptz NOT NULL
);
CREATE INDEX management_tokens_user ON management_tokens (user_id);

-- Applications and their Integration API keys.
CREATE TABLE applications (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  created timestamptz NOT NULL DEFAULT now(),
  modified timestamptz NOT NULL DEFAULT now(),
  name text NOT NULL,
  description text NOT NULL DEFAULT '',
  timezone text NOT NULL,
  currency text NOT NULL,
  case_sensitivity text NOT NULL DEFAULT 'sensitive',
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  limits jsonb NOT NULL DEFAULT '[]'::jsonb,
  campaign_priority text NOT NULL DEFAULT 'universal',
  exclusive_campaigns_strategy text NOT NULL DEFAULT 'listOrder',
  attributes_settings jsonb NOT NULL DEFAULT '{}'::jsonb,
  sandbox boolean NOT NULL DEFAULT false,
  signing_secret text NOT NULL
);
CREATE INDEX applications_account ON applications (account_id);

CREATE TABLE api_keys (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  title text NOT NULL,
  key_hash text NOT NULL UNIQUE,
  expires timestamptz NOT NULL,
  created timestamptz NOT NULL DEFAULT now(),
  created_by integer
);
CREATE INDEX api_keys_application ON api_keys (application_id);

-- Campaigns and their rulesets.
CREATE TABLE campaigns (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  user_id integer,
  created timestamptz NOT NULL DEFAULT now(),
  updated timestamptz NOT NULL DEFAULT now(),
  name text NOT NULL,
  description text NOT NULL DEFAULT '',
  start_time timestamptz,
  end_time timestamptz,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  state text NOT NULL DEFAULT 'enabled',
  active_ruleset_id integer,
  tags jsonb NOT NULL DEFAULT '[]'::jsonb,
  features jsonb NOT NULL DEFAULT '[]'::jsonb,
  coupon_settings jsonb,
  referral_settings jsonb,
  limits jsonb NOT NULL DEFAULT '[]'::jsonb,
  campaign_groups jsonb,
  coupon_redemption_count integer NOT NULL DEFAULT 0,
  referral_redemption_count integer NOT NULL DEFAULT 0,
  discount_count numeric NOT NULL DEFAULT 0,
  discount_effect_count integer NOT NULL DEFAULT 0,
  coupon_creation_count integer NOT NULL DEFAULT 0,
  last_activity timestamptz,
  created_by text NOT NULL DEFAULT '',
  updated_by text NOT NULL DEFAULT ''
);
CREATE INDEX campaigns_application ON campaigns (application_id, id);

CREATE TABLE rulesets (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  campaign_id integer NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  user_id integer,
  created timestamptz NOT NULL DEFAULT now(),
  rules jsonb NOT NULL,
  bindings jsonb NOT NULL DEFAULT '[]'::jsonb,
  rb_version text NOT NULL DEFAULT 'v2',
  activated_at timestamptz
);
CREATE INDEX rulesets_campaign ON rulesets (campaign_id, id);

-- Customers: profiles belong to the account (shared by its Applications), sessions and events
-- to one Application.
CREATE TABLE customer_profiles (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  integration_id text NOT NULL,
  created timestamptz NOT NULL DEFAULT now(),
  last_activity timestamptz NOT NULL DEFAULT now(),
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  closed_sessions integer NOT NULL DEFAULT 0,
  total_sales numeric NOT NULL DEFAULT 0,
  sandbox boolean NOT NULL DEFAULT false,
  UNIQUE (account_id, integration_id)
);

CREATE TABLE customer_sessions (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  integration_id text NOT NULL,
  created timestamptz NOT NULL DEFAULT now(),
  updated timestamptz NOT NULL DEFAULT now(),
  profile_id text NOT NULL DEFAULT '',
  store_integration_id text NOT NULL DEFAULT '',
  state text NOT NULL DEFAULT 'open',
  coupon_codes jsonb NOT NULL DEFAULT '[]'::jsonb,
  referral_code text NOT NULL DEFAULT '',
  loyalty_cards jsonb NOT NULL DEFAULT '[]'::jsonb,
  identifiers jsonb NOT NULL DEFAULT '[]'::jsonb,
  cart_items jsonb NOT NULL DEFAULT '[]'::jsonb,
  additional_costs jsonb NOT NULL DEFAULT '{}'::jsonb,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  total numeric NOT NULL DEFAULT 0,
  cart_item_total numeric NOT NULL DEFAULT 0,
  additional_cost_total numeric NOT NULL DEFAULT 0,
  first_session boolean NOT NULL DEFAULT true,
  effects jsonb NOT NULL DEFAULT '[]'::jsonb,
  update_count integer NOT NULL DEFAULT 0,
  closed_at timestamptz,
  UNIQUE (application_id, integration_id)
);
CREATE INDEX customer_sessions_profile ON customer_sessions (application_id, profile_id);

CREATE TABLE events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  created timestamptz NOT NULL DEFAULT now(),
  profile_id text NOT NULL DEFAULT '',
  session_id text NOT NULL DEFAULT '',
  store_integration_id text NOT NULL DEFAULT '',
  type text NOT NULL,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  effects jsonb NOT NULL DEFAULT '[]'::jsonb
);
CREATE INDEX events_session ON events (application_id, session_id);
