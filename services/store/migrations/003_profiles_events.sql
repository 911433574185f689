-- Profiles and custom events: a customer's events are found by profile (customer data deletion,
-- and later the profile's event history).
CREATE INDEX events_profile ON events (application_id, profile_id);
