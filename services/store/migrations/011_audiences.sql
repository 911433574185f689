-- Audiences (issue 6): account-level groups of customer profiles. `integration` and
-- `integration_id` name the audience in a third-party platform; an id is used once per platform
-- within the account. Memberships go with the audience and with the profile.
CREATE TABLE audiences (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id integer NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
  name text NOT NULL,
  description text,
  integration text,
  integration_id text,
  sandbox boolean NOT NULL DEFAULT false,
  created_in_3rd_party boolean NOT NULL DEFAULT false,
  last_update timestamptz,
  created timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audiences_account ON audiences (account_id, id);
CREATE UNIQUE INDEX audiences_integration_id ON audiences (account_id, (coalesce(integration, '')), integration_id)
  WHERE integration_id IS NOT NULL;

CREATE TABLE audience_memberships (
  audience_id integer NOT NULL REFERENCES audiences(id) ON DELETE CASCADE,
  profile_id bigint NOT NULL REFERENCES customer_profiles(id) ON DELETE CASCADE,
  created timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (profile_id, audience_id)
);
CREATE INDEX audience_memberships_audience ON audience_memberships (audience_id);
