-- Rule-triggered webhooks (Management): definitions only; delivery and its logs come later.
-- A webhook belongs to the account and is attached to some of its Applications.
CREATE TABLE webhooks (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  created timestamptz NOT NULL DEFAULT now(),
  modified timestamptz NOT NULL DEFAULT now(),
  title text NOT NULL,
  verb text NOT NULL,
  url text NOT NULL,
  headers jsonb NOT NULL DEFAULT '[]'::jsonb,
  params jsonb NOT NULL DEFAULT '[]'::jsonb,
  payload text NOT NULL DEFAULT '',
  enabled boolean NOT NULL DEFAULT true
);
CREATE INDEX webhooks_account ON webhooks (account_id, id);

-- Deleting an Application detaches its webhooks (the webhook stays with the account's others).
CREATE TABLE webhook_applications (
  webhook_id integer NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  PRIMARY KEY (webhook_id, application_id)
);
CREATE INDEX webhook_applications_application ON webhook_applications (application_id, webhook_id);

-- The backoffice sessions view lists an Application's sessions newest first; `created` never
-- changes, so this index does not stop session updates from being HOT updates.
CREATE INDEX customer_sessions_created ON customer_sessions (application_id, created);
