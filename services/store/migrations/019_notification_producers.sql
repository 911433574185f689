-- Notification producers of the Management API and the rule engine (issue 7).

-- The campaign evaluation tree of each Application (CampaignEvaluationTreeChanged). This engine
-- has no evaluation groups: the tree is one set, the Application's campaigns that are not archived
-- in list order (id), with the Application's priority as its evaluation mode. One row per
-- Application, created at the first change of its campaigns with the tree as it was before that
-- change; `version` counts the changes. The row is locked by every change to the set, so that two
-- changes racing in one Application number their trees one after the other.
CREATE TABLE campaign_evaluation_trees (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  application_id integer NOT NULL UNIQUE REFERENCES applications(id) ON DELETE CASCADE,
  version integer NOT NULL,
  -- When this version was made, and by whom (a user's name; '' for the tree found before any change).
  created timestamptz NOT NULL,
  updated_by text NOT NULL DEFAULT '',
  tree jsonb NOT NULL
);

-- Asynchronous coupon creation (POST .../coupons_async): a job per request, worked by any node in
-- chunks, each chunk one transaction that inserts its coupons and counts them here, so progress is
-- exact and a job survives the node working it. A node claims a job by setting claimed_by and a
-- lease; a chunk commits only while its node still holds the claim, and a job whose lease ran out
-- (its node died) is claimed by another.
CREATE TABLE coupon_jobs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  campaign_id integer NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  batch_id text NOT NULL,
  user_id integer,
  -- The requester's name, for the notification's EmployeeName.
  employee_name text NOT NULL DEFAULT '',
  -- The creation body as validated (the NewCoupons of the request).
  request jsonb NOT NULL,
  total integer NOT NULL,
  created_count integer NOT NULL DEFAULT 0,
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running', 'done', 'failed')),
  error text,
  created timestamptz NOT NULL,
  updated timestamptz NOT NULL,
  finished_at timestamptz,
  claimed_by text,
  lease_until timestamptz NOT NULL,
  attempts integer NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX coupon_jobs_batch ON coupon_jobs (application_id, batch_id);
CREATE INDEX coupon_jobs_due ON coupon_jobs (lease_until) WHERE state IN ('pending', 'running');
