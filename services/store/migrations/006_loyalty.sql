-- Loyalty programs and their ledgers.
--
-- A program belongs to the account (profiles are account-level too) and is subscribed by some of
-- its Applications. Its name is unique in the account: the integration state lists programs in a
-- map keyed by name.
CREATE TABLE loyalty_programs (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  created timestamptz NOT NULL DEFAULT now(),
  modified timestamptz NOT NULL DEFAULT now(),
  name text NOT NULL,
  title text NOT NULL,
  description text NOT NULL DEFAULT '',
  -- A duration (number plus unit letter, see services/management/loyalty.ts) or 'unlimited'.
  default_validity text NOT NULL DEFAULT 'unlimited',
  -- A duration or 'immediate'.
  default_pending text NOT NULL DEFAULT 'immediate',
  allow_subledger boolean NOT NULL DEFAULT false,
  -- [{name, minPoints}] with unique names and ascending minPoints.
  tiers jsonb NOT NULL DEFAULT '[]'::jsonb,
  card_based boolean NOT NULL DEFAULT false,
  users_per_card_limit integer,
  UNIQUE (account_id, name)
);

-- A join table rather than an array, so that deleting an Application unsubscribes it.
CREATE TABLE loyalty_program_applications (
  program_id integer NOT NULL REFERENCES loyalty_programs(id) ON DELETE CASCADE,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  PRIMARY KEY (program_id, application_id)
);
CREATE INDEX loyalty_program_applications_application ON loyalty_program_applications (application_id);

-- One row per ledger: (program, profile, subledger), '' being the program's main ledger. Every
-- writer of a ledger's transactions (Management add/deduct, and later session close, events,
-- expiry) first locks this row FOR UPDATE, which serialises the changes to one ledger: the
-- remaining amounts of its grants are then read and changed by one writer at a time.
CREATE TABLE loyalty_ledgers (
  program_id integer NOT NULL REFERENCES loyalty_programs(id) ON DELETE CASCADE,
  profile_id bigint NOT NULL REFERENCES customer_profiles(id) ON DELETE CASCADE,
  subledger_id text NOT NULL DEFAULT '',
  -- The profile's integration ID (stable once set), kept here so ledgers read without a join.
  integration_id text NOT NULL,
  -- A profile joins a program at its first transaction.
  joined timestamptz NOT NULL,
  PRIMARY KEY (program_id, profile_id, subledger_id)
);

-- The ledger's transactions. Amounts are positive; `type` says which way they go.
--  addition:    a grant; active from start_date (pending before), until expiry_date (null: never).
--               `remaining` is what is left of it after deductions and expiry.
--  subtraction: a deduction; loyalty_consumptions says which grants it took points from.
--  expire:      what was left of a grant at its expiry (created = the grant's expiry_date).
-- The active balance at time t is the sum of `remaining` of the additions active at t, so pending
-- points become active and points expire without any write at that moment.
CREATE TABLE loyalty_transactions (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  program_id integer NOT NULL,
  profile_id bigint NOT NULL,
  subledger_id text NOT NULL DEFAULT '',
  type text NOT NULL CHECK (type IN ('addition', 'subtraction', 'expire')),
  amount numeric NOT NULL CHECK (amount > 0),
  remaining numeric CHECK ((type = 'addition') = (remaining IS NOT NULL) AND remaining >= 0 AND remaining <= amount),
  start_date timestamptz NOT NULL,
  expiry_date timestamptz,
  name text NOT NULL DEFAULT '',
  customer_session_id text NOT NULL DEFAULT '',
  event_id bigint,
  user_id integer REFERENCES users(id) ON DELETE SET NULL,
  created timestamptz NOT NULL,
  FOREIGN KEY (program_id, profile_id, subledger_id) REFERENCES loyalty_ledgers (program_id, profile_id, subledger_id) ON DELETE CASCADE
);
CREATE INDEX loyalty_transactions_ledger ON loyalty_transactions (program_id, profile_id, subledger_id, created, id);
-- The grants that still hold points: what balances and deductions read.
CREATE INDEX loyalty_transactions_open_grants ON loyalty_transactions (program_id, profile_id, subledger_id, expiry_date)
  WHERE type = 'addition' AND remaining > 0;

-- Which grants a subtraction or an expiry took points from, and how many: what a rollback (a
-- cancelled session, a return) gives back, and to which grant.
CREATE TABLE loyalty_consumptions (
  transaction_id bigint NOT NULL REFERENCES loyalty_transactions(id) ON DELETE CASCADE,
  grant_id bigint NOT NULL REFERENCES loyalty_transactions(id) ON DELETE CASCADE,
  amount numeric NOT NULL CHECK (amount > 0),
  PRIMARY KEY (transaction_id, grant_id)
);
CREATE INDEX loyalty_consumptions_grant ON loyalty_consumptions (grant_id);
