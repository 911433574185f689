-- Access logs (every Integration and Management API request but logins and token redemptions) and
-- webhook logs (every outbound webhook attempt), read through the Management API.

-- Requests logged per account, added by the access log writer at each flush.
ALTER TABLE accounts ADD COLUMN api_call_count bigint NOT NULL DEFAULT 0;

-- No foreign keys: a checked reference locks the referenced account and Application row for every
-- logged request (a write per row on the hottest path). The writer inserts only rows whose account
-- exists and whose Application belongs to it; deleting an Application deletes its entries itself.
CREATE TABLE access_logs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  uuid uuid NOT NULL,
  account_id integer NOT NULL,
  -- NULL for account-level Management calls (and for calls whose Application is gone by the flush).
  application_id integer,
  time timestamptz NOT NULL,
  status integer NOT NULL,
  method text NOT NULL,
  -- path without the query string: what the `path` filter matches.
  path text NOT NULL,
  request_uri text NOT NULL,
  request_payload text NOT NULL DEFAULT '',
  response_payload text NOT NULL DEFAULT ''
);
-- Every read is "one Application (or the account) within a time range", newest first.
CREATE INDEX access_logs_application_time ON access_logs (application_id, time);
CREATE INDEX access_logs_account_time ON access_logs (account_id, time);

CREATE TABLE webhook_logs (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  -- No foreign key: webhooks may be deleted while their attempts stay readable.
  webhook_id integer NOT NULL,
  campaign_id integer,
  integration_request_uuid text NOT NULL DEFAULT '',
  -- {url, method, headers, body} as sent.
  request jsonb NOT NULL DEFAULT '{}'::jsonb,
  request_time timestamptz NOT NULL DEFAULT now(),
  response text NOT NULL DEFAULT '',
  response_time timestamptz,
  -- HTTP status, NULL when no response came (network error, timeout).
  status integer,
  url text NOT NULL DEFAULT '',
  attempt integer NOT NULL DEFAULT 1
);
CREATE INDEX webhook_logs_application_time ON webhook_logs (application_id, request_time);
CREATE INDEX webhook_logs_webhook ON webhook_logs (webhook_id);
