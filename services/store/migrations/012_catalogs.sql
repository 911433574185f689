-- Catalogs (issue 6): account-level product catalogs, subscribed by some of the account's
-- Applications. `version` is the version of the last sync applied (0: never synced). Items are
-- keyed by SKU within their catalog. Every observed price is a price record (sku per account).
CREATE TABLE catalogs (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name text NOT NULL,
  description text NOT NULL DEFAULT '',
  version integer NOT NULL DEFAULT 0,
  created_by integer,
  created timestamptz NOT NULL DEFAULT now(),
  modified timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX catalogs_account ON catalogs (account_id, id);

CREATE TABLE catalog_applications (
  catalog_id integer NOT NULL REFERENCES catalogs(id) ON DELETE CASCADE,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  PRIMARY KEY (catalog_id, application_id)
);
CREATE INDEX catalog_applications_application ON catalog_applications (application_id);

CREATE TABLE catalog_items (
  catalog_id integer NOT NULL REFERENCES catalogs(id) ON DELETE CASCADE,
  sku text NOT NULL,
  price numeric,
  attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
  product jsonb,
  created timestamptz NOT NULL DEFAULT now(),
  modified timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (catalog_id, sku)
);

CREATE TABLE price_records (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  application_id integer REFERENCES applications(id) ON DELETE CASCADE,
  catalog_id integer REFERENCES catalogs(id) ON DELETE SET NULL,
  sku text NOT NULL,
  price numeric NOT NULL,
  observed_at timestamptz NOT NULL DEFAULT now(),
  context_id text NOT NULL,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  target jsonb NOT NULL DEFAULT '{"type":"everyone"}'::jsonb
);
CREATE INDEX price_records_sku ON price_records (account_id, sku, observed_at);
