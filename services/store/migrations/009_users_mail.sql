-- Users (issue 5, area F): single-use invite and password-reset tokens, the mail outbox and the
-- login throttle.

-- Invite (7 days) and password-reset (1 hour) tokens. Only the SHA-256 of a token is kept; a token
-- is used at most once (used_at is set by the conditional update that consumes it).
CREATE TABLE user_tokens (
  token_hash text PRIMARY KEY,
  user_id integer NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('invite', 'reset')),
  created timestamptz NOT NULL DEFAULT now(),
  expires timestamptz NOT NULL,
  used_at timestamptz
);
CREATE INDEX user_tokens_user ON user_tokens (user_id, kind);

-- Mails written in the same transaction as the change that causes them and sent by the node's
-- mail dispatcher. A row is claimed by moving next_attempt_at past the send timeout, so a node
-- that dies while sending leaves the row to be retried by another. The body (which may hold a
-- token) is blanked once the mail is sent, or has failed for good.
CREATE TABLE mail_outbox (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  created timestamptz NOT NULL DEFAULT now(),
  recipient text NOT NULL,
  subject text NOT NULL,
  body text NOT NULL,
  kind text NOT NULL,
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error text,
  sent_at timestamptz
);
CREATE INDEX mail_outbox_due ON mail_outbox (next_attempt_at) WHERE state = 'pending';

-- Failed logins per e-mail (lower-cased, whether or not a user has it) in a 15-minute window
-- that starts at the first failure.
CREATE TABLE login_throttle (
  email text PRIMARY KEY,
  window_start timestamptz NOT NULL,
  failures integer NOT NULL
);
CREATE INDEX login_throttle_window ON login_throttle (window_start);
