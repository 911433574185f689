-- Loyalty cards of card-based programs (issue 6, area J). A card belongs to one program (and so
-- to its account); its identifier is unique in the program. Profiles share a card through
-- loyalty_card_profiles, at most usersPerCardLimit of them. A blocked card (status inactive) keeps
-- its profiles and its reason.
CREATE TABLE loyalty_cards (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  program_id integer NOT NULL REFERENCES loyalty_programs(id) ON DELETE CASCADE,
  identifier text NOT NULL,
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'inactive')),
  block_reason text NOT NULL DEFAULT '',
  created timestamptz NOT NULL,
  modified timestamptz NOT NULL,
  UNIQUE (program_id, identifier)
);

CREATE TABLE loyalty_card_profiles (
  card_id integer NOT NULL REFERENCES loyalty_cards(id) ON DELETE CASCADE,
  profile_id bigint NOT NULL REFERENCES customer_profiles(id) ON DELETE CASCADE,
  created timestamptz NOT NULL,
  PRIMARY KEY (card_id, profile_id)
);
CREATE INDEX loyalty_card_profiles_profile ON loyalty_card_profiles (profile_id);
