-- Coupon reservations (issue 6): which profiles hold a coupon reserved.
--
-- A reservation names the profile by its integration ID (profiles belong to the account, coupons
-- to an Application). Soft or hard is a property of the coupon (is_reservation_mandatory, or the
-- v1 `reservation` = false), not of the row. coupons.reservation_counter is kept equal to the
-- number of rows of the coupon, changed in the same transaction under the coupon's row lock.
CREATE TABLE coupon_reservations (
  coupon_id bigint NOT NULL REFERENCES coupons(id) ON DELETE CASCADE,
  application_id integer NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  integration_id text NOT NULL,
  created timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (coupon_id, integration_id)
);
-- The customer inventory reads a profile's reservations in one Application.
CREATE INDEX coupon_reservations_profile ON coupon_reservations (application_id, integration_id);

-- A visible coupon is implicitly soft-reserved for every customer of its Application.
ALTER TABLE coupons ADD COLUMN implicitly_reserved boolean NOT NULL DEFAULT false;
-- The inventory lists a profile's recipient coupons.
CREATE INDEX coupons_recipient ON coupons (application_id, recipient_integration_id) WHERE recipient_integration_id <> '';
CREATE INDEX coupons_implicitly_reserved ON coupons (application_id, id) WHERE implicitly_reserved;
