-- Strikethrough pricing and loyalty notifications (issue 7).

-- The catalog version of the sync that last set an item (0: before this column existed). A
-- strikethrough job of a sync evaluates the items of its version: an item a later sync changed
-- again is left to that sync's job, which sees it as it is then.
ALTER TABLE catalog_items ADD COLUMN version integer NOT NULL DEFAULT 0;
CREATE INDEX catalog_items_version ON catalog_items (catalog_id, version, sku);

-- Strikethrough pricing jobs: one per Application with a StrikethroughPrice subscriber and per
-- change that moves its prices (a catalog sync of a catalog it subscribes to, a change of one of
-- its campaigns), written in the transaction of that change. Worked by any node like coupon_jobs
-- (claimed_by and a lease), one batch of items per transaction: the batch's price records, its
-- notification and the job's progress commit together, so a batch is notified once and a job
-- whose node died continues from its last batch.
CREATE TABLE strikethrough_jobs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  event text NOT NULL CHECK (event IN ('catalog_sync', 'campaign_change')),
  -- catalog_sync: the catalog and the version the sync gave it.
  catalog_id integer REFERENCES catalogs(id) ON DELETE CASCADE,
  version integer,
  -- campaign_change: the campaign (no foreign key: a deleted campaign is a change too).
  campaign_id integer,
  -- Fixed by the first batch: how many items the job evaluates, in how many batches.
  total_items integer,
  total_batches integer,
  done_batches integer NOT NULL DEFAULT 0,
  -- The last item of the last batch done (items go by catalog, then SKU).
  cursor_catalog_id integer,
  cursor_sku text,
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running', 'done', 'failed')),
  error text,
  created timestamptz NOT NULL,
  updated timestamptz NOT NULL,
  finished_at timestamptz,
  claimed_by text,
  lease_until timestamptz NOT NULL,
  attempts integer NOT NULL DEFAULT 0,
  CHECK ((event = 'catalog_sync') = (catalog_id IS NOT NULL AND version IS NOT NULL))
);
CREATE INDEX strikethrough_jobs_due ON strikethrough_jobs (lease_until) WHERE state IN ('pending', 'running');
-- An Application's unfinished jobs: a job starts after those before it; a change finds a job waiting.
CREATE INDEX strikethrough_jobs_application ON strikethrough_jobs (application_id, id) WHERE state IN ('pending', 'running');

-- Price records of an Application (sessions, strikethrough evaluations) are its own; those of a
-- catalog sync (application_id null) belong to every Application subscribing to the catalog.
CREATE INDEX price_records_application_sku ON price_records (application_id, sku, observed_at) WHERE application_id IS NOT NULL;

-- LoyaltyPointsExpiring: how long before their expiry a grant's points are announced.
ALTER TABLE loyalty_programs ADD COLUMN expiring_points_notice text NOT NULL DEFAULT '7D';

-- The tier last notified (TierUpgrade / TierDowngrade) per ledger, null for none, changed only
-- under the ledger's lock: each crossing is notified once. Its minPoints, as the tiers were then,
-- says whether a new tier is an upgrade or a downgrade.
ALTER TABLE loyalty_ledgers ADD COLUMN tier_name text;
ALTER TABLE loyalty_ledgers ADD COLUMN tier_min_points numeric;

-- A grant written pending and not yet seen active by the scheduler (its start can move the tier);
-- a grant whose LoyaltyPointsExpiring was sent. Both change only under the ledger's lock.
ALTER TABLE loyalty_transactions ADD COLUMN activation_pending boolean NOT NULL DEFAULT false;
ALTER TABLE loyalty_transactions ADD COLUMN expiry_notified boolean NOT NULL DEFAULT false;
UPDATE loyalty_transactions SET activation_pending = true WHERE type = 'addition' AND start_date > created AND start_date > now();
CREATE INDEX loyalty_transactions_activation ON loyalty_transactions (start_date) WHERE activation_pending;
CREATE INDEX loyalty_transactions_expiring ON loyalty_transactions (program_id, expiry_date)
  WHERE type = 'addition' AND remaining > 0 AND NOT expiry_notified;
