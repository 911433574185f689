-- Achievements (issue 6, area K): goals of a campaign that increaseAchievementProgress effects
-- move a customer profile towards. A profile's progress is kept in runs: one row per run (a
-- period), the latest being the current one; older runs are the progress history.
CREATE TABLE achievements (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  campaign_id integer NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  name text NOT NULL,
  title text NOT NULL DEFAULT '',
  description text NOT NULL DEFAULT '',
  target numeric NOT NULL,
  period text NOT NULL,
  period_end_override jsonb,
  recurrence_policy text NOT NULL DEFAULT 'no_recurrence',
  activation_policy text NOT NULL DEFAULT 'user_action',
  fixed_start_date timestamptz,
  end_date timestamptz,
  allow_rollback_after_completion boolean NOT NULL DEFAULT false,
  created timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX achievements_campaign ON achievements (application_id, campaign_id, id);
CREATE UNIQUE INDEX achievements_name ON achievements (campaign_id, name);

-- One row per (achievement, profile): its row lock serialises concurrent progress of the profile.
CREATE TABLE achievement_profiles (
  achievement_id integer NOT NULL REFERENCES achievements(id) ON DELETE CASCADE,
  integration_id text NOT NULL,
  touched timestamptz NOT NULL,
  PRIMARY KEY (achievement_id, integration_id)
);

CREATE TABLE achievement_progress (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  achievement_id integer NOT NULL REFERENCES achievements(id) ON DELETE CASCADE,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  integration_id text NOT NULL,
  progress numeric NOT NULL DEFAULT 0,
  start_date timestamptz NOT NULL,
  end_date timestamptz,
  completion_date timestamptz,
  created timestamptz NOT NULL
);
CREATE INDEX achievement_progress_profile ON achievement_progress (achievement_id, integration_id, id);
CREATE INDEX achievement_progress_app_profile ON achievement_progress (application_id, integration_id);
