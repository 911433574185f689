-- Outbound HTTP (issue 7): rule-triggered webhook calls and notifications. A use case writes its
-- requests here in the same transaction as the change that causes them, so a request exists if
-- and only if the change committed; every node's dispatcher sends due rows (services/notify).
-- A row is claimed by moving next_attempt_at past the send timeout (a lease): a node that dies
-- while sending leaves the row to another, so delivery is at least once; receivers drop
-- duplicates by notification_id (sent as X-Notification-Id, the same on every attempt).
CREATE TABLE outbox (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  notification_id uuid NOT NULL,
  account_id integer NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  -- The Application the request is about (webhook logs are per Application); no foreign key, so
  -- that a delete of the Application still lets the notification of that delete go out.
  application_id integer,
  -- `webhook`: a rule-triggered webhook (webhooks.id); `notification`: a notification webhook
  -- (notification_webhooks.id). The endpoint is read again when sending: a deleted endpoint
  -- stops its deliveries, a disabled webhook sends nothing, and the secret that signs is its current one.
  kind text NOT NULL CHECK (kind IN ('webhook', 'notification')),
  endpoint_id integer NOT NULL,
  campaign_id integer,
  integration_request_uuid text NOT NULL DEFAULT '',
  notification_type text NOT NULL DEFAULT '',
  method text NOT NULL,
  url text NOT NULL,
  -- Header lines `Name: value`, as configured on the endpoint.
  headers jsonb NOT NULL DEFAULT '[]'::jsonb,
  body text NOT NULL DEFAULT '',
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  created timestamptz NOT NULL,
  next_attempt_at timestamptz NOT NULL,
  last_error text,
  finished_at timestamptz
);
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE state = 'pending';

-- Notification webhooks (ext): per-Application endpoints with the notification types they want.
CREATE TABLE notification_webhooks (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  created timestamptz NOT NULL,
  modified timestamptz NOT NULL,
  url text NOT NULL,
  headers jsonb NOT NULL DEFAULT '[]'::jsonb,
  notification_types jsonb NOT NULL DEFAULT '[]'::jsonb,
  -- HMAC key of X-Signature ('' signs nothing).
  secret text NOT NULL DEFAULT '',
  enabled boolean NOT NULL DEFAULT true
);
CREATE INDEX notification_webhooks_application ON notification_webhooks (application_id, id);

-- Rule-triggered webhooks may have a signing secret too (ext).
ALTER TABLE webhooks ADD COLUMN secret text NOT NULL DEFAULT '';

-- Webhook logs of notification webhooks name their kind; a notification's attempts are found by
-- its id.
ALTER TABLE webhook_logs ADD COLUMN kind text NOT NULL DEFAULT 'webhook';
ALTER TABLE webhook_logs ADD COLUMN notification_id uuid;
CREATE INDEX webhook_logs_notification ON webhook_logs (notification_id) WHERE notification_id IS NOT NULL;
