// Coupon reservations (issue 6): create, delete and list the holders of a coupon; and the customer
// inventory (a profile's profile, referrals, coupons, loyalty and achievements in one answer).
//
// Decisions written down here (see also the report of issue 6, area G):
// - A reservation names profiles by integration ID; creating one creates the missing profiles
//   (as a session update or an audience `add` does), so the holders list always shows profiles.
// - `reservationLimit` > 0 caps how many profiles hold the coupon. "Creating a reservation
//   overrides the reservation limit" is read as: this endpoint is what uses the limit up, and a
//   request is all or nothing: when the profiles it adds would pass the limit it changes nothing
//   and answers 409 `ReservationLimitReached`. Profiles that already hold it do not count again.
// - Every change of one coupon's reservations locks the coupon row (FOR UPDATE) in its
//   transaction, so parallel requests on any node keep reservation_counter exact and the limit
//   held. The port's actor key is the coupon plus the request's IDs (see actorKeyOf): one actor
//   per coupon would refuse a fourth parallel request with 409 instead of letting it wait.
// - Hard (`isReservationMandatory`, or the v1 `reservation` = false) versus soft is a property of
//   the coupon; facts.ts marks a hard-reserved coupon that the session's profile does not hold.
import type { AppRef, CouponReservationCall, CouponReservationHoldersCall, CustomerInventoryCall } from '../actors/port.js';
import { AppError, badRequest, notFound, type Clock } from '../shared/index.js';
import type { Db, Queryable } from '../store/index.js';
import { couponView, normalizeCode, referralView } from '../store/index.js';
import { LoyaltyService } from './loyalty.js';
import { loadProfile, profileView, toProfile } from './repository.js';
import { AchievementService } from './achievements.js';





/** At most this many integration IDs per create or delete request (service-spec limits). */
export const MAX_RESERVATION_IDS = 1000;

const reservationLimitReached = (limit: number, holders: number, adding: number): AppError =>
  new AppError('conflict', `The coupon's reservation limit of ${limit} would be exceeded`, [
    {
      title: 'ReservationLimitReached',
      details: `the coupon is reserved by ${holders} of at most ${limit} profiles; ${adding} more were asked`,
      source: { pointer: '/integrationIDs' },
    },
  ]);

// The Integration API's edge does not look into text (its hot path); these operations refuse what
// the database cannot store (NUL, a lone surrogate) on the value's own pointer.
const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const storable = (text: string, pointer: string): string => {
  if (text.includes('\u0000') || loneSurrogate.test(text)) throw badRequest('Text cannot contain the NUL character (U+0000) or a lone UTF-16 surrogate', pointer);
  return text;
};

function checkIds(ids: unknown): string[] {
  if (!Array.isArray(ids) || ids.length === 0) throw badRequest('integrationIDs must list 1 to 1000 integration IDs', '/integrationIDs');
  if (ids.length > MAX_RESERVATION_IDS) throw badRequest(`integrationIDs must list at most ${MAX_RESERVATION_IDS} integration IDs`, '/integrationIDs');
  ids.forEach((id, i) => {
    if (typeof id !== 'string' || id === '') throw badRequest('An integration ID is a non-empty string', `/integrationIDs/${i}`);
    if (id.length > 1000) throw badRequest('An integration ID has at most 1000 characters', `/integrationIDs/${i}`);
    storable(id, `/integrationIDs/${i}`);
  });
  // Sorted: parallel transactions insert new profiles in one order, so they never deadlock.
  return [...new Set(ids as string[])].sort();
}

export class ReservationService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  private async couponRow(q: Queryable, app: AppRef, couponValue: string, lock: boolean): Promise<Record<string, unknown>> {
    if (couponValue === '') throw notFound('Coupon', '/path/couponValue');
    storable(couponValue, '/path/couponValue');
    const [setting] = await q.query<{ case_sensitivity: string }>(`SELECT case_sensitivity FROM applications WHERE id = $1`, [app.applicationId]);
    const value = normalizeCode({ caseSensitivity: setting?.case_sensitivity ?? 'sensitive' }, couponValue);
    const [row] = await q.query(`SELECT * FROM coupons WHERE application_id = $1 AND value = $2 ${lock ? 'FOR UPDATE' : ''}`, [app.applicationId, value]);
    if (!row) throw notFound('Coupon', '/path/couponValue');
    return row;
  }

  /** POST /v1/coupon_reservations/{couponValue}: 201 with the coupon. */
  async create(call: CouponReservationCall): Promise<Record<string, unknown>> {
    const ids = checkIds(call.integrationIDs);
    const now = this.clock.now().toISOString();
    return this.db.transaction(async (tx) => {
      const coupon = await this.couponRow(tx, call.app, call.couponValue, true);
      const couponId = Number(coupon.id);
      const held = await tx.query<{ integration_id: string }>(
        `SELECT integration_id FROM coupon_reservations WHERE coupon_id = $1 AND integration_id IN (SELECT jsonb_array_elements_text($2::jsonb))`,
        [couponId, JSON.stringify(ids)],
      );
      const heldSet = new Set(held.map((h) => h.integration_id));
      const adding = ids.filter((id) => !heldSet.has(id));
      const limit = Number(coupon.reservation_limit);
      const holders = Number(coupon.reservation_counter);
      if (limit > 0 && holders + adding.length > limit) throw reservationLimitReached(limit, holders, adding.length);
      if (adding.length === 0) return couponView(coupon);
      await tx.query(
        `INSERT INTO customer_profiles (account_id, integration_id, created, last_activity)
         SELECT $1, id, $2, $2 FROM jsonb_array_elements_text($3::jsonb) AS t(id)
         ON CONFLICT (account_id, integration_id) DO NOTHING`,
        [call.app.accountId, now, JSON.stringify(adding)],
      );
      const inserted = await tx.query(
        `INSERT INTO coupon_reservations (coupon_id, application_id, integration_id, created)
         SELECT $1, $2, id, $3 FROM jsonb_array_elements_text($4::jsonb) AS t(id)
         ON CONFLICT (coupon_id, integration_id) DO NOTHING RETURNING integration_id`,
        [couponId, call.app.applicationId, now, JSON.stringify(adding)],
      );
      const [updated] = await tx.query(`UPDATE coupons SET reservation_counter = reservation_counter + $2 WHERE id = $1 RETURNING *`, [
        couponId,
        inserted.length,
      ]);
      return couponView(updated!);
    });
  }

  /** DELETE /v1/coupon_reservations/{couponValue}: the listed profiles stop holding it (204). */
  async delete(call: CouponReservationCall): Promise<void> {
    const ids = checkIds(call.integrationIDs);
    await this.db.transaction(async (tx) => {
      const coupon = await this.couponRow(tx, call.app, call.couponValue, true);
      const removed = await tx.query(
        `DELETE FROM coupon_reservations WHERE coupon_id = $1 AND integration_id IN (SELECT jsonb_array_elements_text($2::jsonb)) RETURNING integration_id`,
        [Number(coupon.id), JSON.stringify(ids)],
      );
      if (removed.length > 0) {
        await tx.query(`UPDATE coupons SET reservation_counter = GREATEST(reservation_counter - $2, 0) WHERE id = $1`, [Number(coupon.id), removed.length]);
      }
    });
  }

  /** GET /v1/coupon_reservations/customerprofiles/{couponValue}: the holders' profiles. */
  async holders(call: CouponReservationHoldersCall): Promise<Record<string, unknown>> {
    const coupon = await this.couponRow(this.db, call.app, call.couponValue, false);
    const rows = await this.db.query(
      `SELECT p.* FROM coupon_reservations r
         JOIN customer_profiles p ON p.account_id = $2 AND p.integration_id = r.integration_id
        WHERE r.coupon_id = $1 ORDER BY r.created, r.integration_id`,
      [Number(coupon.id), call.app.accountId],
    );
    return { totalResultSize: rows.length, data: rows.map((r) => profileView(toProfile(r))) };
  }

  /**
   * GET /v1/customer_profiles/{integrationId}/inventory. Each part is present when its flag is
   * set. Coupons: those the profile reserved (soft or hard), those made for it
   * (recipientIntegrationId) and the Application's implicitly reserved (visible) ones, each once.
   * Achievements: the Application's active ones with the profile's current progress.
   */
  async inventory(call: CustomerInventoryCall): Promise<Record<string, unknown>> {
    const profile = await loadProfile(this.db, call.app.accountId, storable(call.integrationId, '/path/integrationId'));
    if (!profile) throw notFound('Customer profile', '/path/integrationId');
    const out: Record<string, unknown> = {};
    if (call.profile) out.profile = profileView(profile);
    if (call.referrals) {
      const rows = await this.db.query(`SELECT * FROM referrals WHERE application_id = $1 AND advocate_profile_integration_id = $2 ORDER BY id`, [
        call.app.applicationId,
        call.integrationId,
      ]);
      out.referrals = rows.map(referralView);
    }
    if (call.coupons) {
      const rows = await this.db.query(
        `SELECT c.* FROM coupons c
          WHERE c.application_id = $1
            AND (c.id IN (SELECT coupon_id FROM coupon_reservations WHERE application_id = $1 AND integration_id = $2)
                 OR c.recipient_integration_id = $2
                 OR c.implicitly_reserved)
          ORDER BY c.id`,
        [call.app.applicationId, call.integrationId],
      );
      out.coupons = rows.map(couponView);
    }
    // The cards the profile shares carry their own ledgers: a card's balances are read here (issue 6).
    if (call.loyalty) out.loyalty = { programs: await this.loyaltyPrograms(call.app, profile.id), cards: await new LoyaltyService(this.db, this.clock).cards(call.app, profile.id, []) };
    // Issue 6, area K: the active achievements with the profile's current progress.
    if (call.achievements) out.achievements = ((await new AchievementService(this.db, this.clock).list({ app: call.app, integrationId: call.integrationId })) as { data: unknown[] }).data;
    return out;
  }

  /** The Application's loyalty programs with the profile's balances in them, keyed by name. */
  private async loyaltyPrograms(app: AppRef, profileId: number): Promise<Record<string, unknown>> {
    const now = this.clock.now().toISOString();
    // Balances as the Management ledger view computes them: the active balance is what is left of
    // the grants active now, pending is what is left of grants not started yet, and spent and
    // expired sum their transactions plus what is left of grants past their expiry.
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT p.id, p.name, p.title, l.subledger_id, l.joined,
              COALESCE(SUM(t.remaining) FILTER (WHERE t.type = 'addition' AND t.start_date <= $3 AND (t.expiry_date IS NULL OR t.expiry_date > $3)), 0)::float8 AS active,
              COALESCE(SUM(t.remaining) FILTER (WHERE t.type = 'addition' AND t.start_date > $3), 0)::float8 AS pending,
              COALESCE(SUM(t.amount) FILTER (WHERE t.type = 'subtraction'), 0)::float8 AS spent,
              (COALESCE(SUM(t.amount) FILTER (WHERE t.type = 'expire'), 0)
                + COALESCE(SUM(t.remaining) FILTER (WHERE t.type = 'addition' AND t.start_date <= $3 AND t.expiry_date <= $3), 0))::float8 AS expired
         FROM loyalty_programs p
         JOIN loyalty_program_applications pa ON pa.program_id = p.id AND pa.application_id = $1
         LEFT JOIN loyalty_ledgers l ON l.program_id = p.id AND l.profile_id = $2
         LEFT JOIN loyalty_transactions t ON t.program_id = l.program_id AND t.profile_id = l.profile_id AND t.subledger_id = l.subledger_id
        GROUP BY p.id, p.name, p.title, l.subledger_id, l.joined
        ORDER BY p.id, l.subledger_id`,
      [app.applicationId, profileId, now],
    );
    const round = (n: unknown) => Math.round(Number(n) * 100) / 100;
    const programs: Record<string, Record<string, unknown>> = {};
    for (const r of rows) {
      const name = r.name as string;
      const program = (programs[name] ??= {
        id: r.id,
        name,
        title: r.title,
        ledger: { activePoints: 0, pendingPoints: 0, spentPoints: 0, expiredPoints: 0 },
        subLedgers: {},
      });
      if (r.subledger_id === null || r.subledger_id === undefined) continue;
      const balances = { activePoints: round(r.active), pendingPoints: round(r.pending), spentPoints: round(r.spent), expiredPoints: round(r.expired) };
      if (r.subledger_id === '') {
        program.ledger = balances;
        program.joined = r.joined instanceof Date ? r.joined.toISOString() : r.joined;
      } else (program.subLedgers as Record<string, unknown>)[r.subledger_id as string] = balances;
    }
    return programs;
  }
}

/** Whether a coupon row makes a reservation a requirement of use (a hard reservation). */
export const isHardReserved = (r: Record<string, unknown>): boolean => r.is_reservation_mandatory === true || r.reservation === false;
