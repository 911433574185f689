// Coupons of a campaign (service-spec "Management API v1", coupons): created in batches from a
// pattern, updated by batch, listed and deleted with the spec's filters. Codes are stored as the
// Integration API looks them up (normalized under the Application's caseSensitivity), so a coupon
// created here is redeemable at once.
import { randomBytes } from 'node:crypto';
import { badRequest, notFound, randomToken } from '../shared/index.js';
import {
  couponNotificationPages,
  couponView,
  enqueueCouponBatchCreated,
  enqueueNotifications,
  normalizeCode,
  type CouponNotificationMeta,
  type Queryable,
} from '../store/index.js';
import { requireCampaign } from './campaigns.js';
import { Conditions, FOLDED, foldCode, usability, validity, type Validity } from './code-filters.js';
import { listPage, outboundWritten, requireApplication, userName, type ListQuery, type ManagementContext, type Principal } from './context.js';

export interface NewCouponsBody {
  usageLimit: number;
  discountLimit?: number;
  startDate?: string;
  expiryDate?: string;
  validCharacters: string[];
  couponPattern: string;
  numberOfCoupons: number;
  uniquePrefix?: string;
  attributes?: Record<string, unknown>;
  recipientIntegrationId?: string;
  reservationLimit?: number;
  isReservationMandatory?: boolean;
  implicitlyReserved?: boolean;
}

/** What an update of coupons may change (absent: unchanged). */
export interface CouponUpdate {
  usageLimit?: number;
  discountLimit?: number;
  startDate?: string;
  expiryDate?: string;
  attributes?: Record<string, unknown>;
  reservationLimit?: number;
  isReservationMandatory?: boolean;
  implicitlyReserved?: boolean;
  recipientIntegrationId?: string;
}

export interface CouponBatchUpdate extends Omit<CouponUpdate, 'recipientIntegrationId'> {
  batchID: string;
}

export interface CouponFilters {
  value?: string;
  exactMatch?: boolean;
  createdBefore?: string;
  createdAfter?: string;
  startsAfter?: string;
  startsBefore?: string;
  expiresAfter?: string;
  expiresBefore?: string;
  valid?: Validity;
  batchId?: string;
  usable?: boolean;
  referralId?: number;
  recipientIntegrationId?: string;
}

export interface CouponListQuery extends ListQuery, CouponFilters {
  campaignState?: string;
}

/** Spec "Limits": coupons per create request. */
export const MAX_COUPONS = 20_000;
export const MAX_COUPONS_WITH_PREFIX = 200_000;
/** Spec "Limits": coupons listed in a create response. */
const RESPONSE_COUPONS = 1000;
/** Codes per INSERT: large enough that 200,000 codes are a few dozen statements, small enough to keep each parameter a few hundred KB. */
const INSERT_CHUNK = 10_000;
/** Minimum length of a coupon code (spec "Limits"). */
const MIN_CODE_LENGTH = 4;
/** Advisory lock namespace of coupon creation (auth and migrations use 7263501-7263502). */
const CODES_LOCK = 7263503;

const SORTABLE = {
  id: 'id',
  created: 'created',
  value: 'value',
  startDate: 'start_date',
  expiryDate: 'expiry_date',
  usageLimit: 'usage_limit',
  usageCounter: 'usage_counter',
  batchId: 'batch_id',
};

/** A time the spec reads as "no time": zero (Go's zero time, year 1) or negative means "never expires". */
const noTime = (t: string): boolean => !(Date.parse(t) > 0);

/**
 * The Application's `attributesSettings.mandatory.coupons`: attributes every coupon must carry.
 * A missing one is refused like a missing body property, on its would-be pointer.
 */
function checkMandatory(app: Record<string, unknown>, attributes: Record<string, unknown> | undefined): void {
  const settings = app.attributes_settings as { mandatory?: { coupons?: unknown } } | null | undefined;
  const names = settings?.mandatory?.coupons;
  if (!Array.isArray(names)) return;
  for (const name of names) {
    // Own properties only: `constructor` or `toString` are not therefore carried by every body.
    if (typeof name === 'string' && (attributes === undefined || !Object.hasOwn(attributes, name) || attributes[name] === undefined)) {
      throw badRequest(`The Application requires the coupon attribute ${JSON.stringify(name)}`, `/attributes/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`);
    }
  }
}

function checkDates(startDate: string | undefined, expiryDate: string | null | undefined): void {
  if (startDate && expiryDate && Date.parse(expiryDate) <= Date.parse(startDate)) {
    throw badRequest('`expiryDate` must be after `startDate`', '/expiryDate');
  }
}

/** The codes a creation body describes, normalized under the Application's caseSensitivity. */
function codeSpaceOf(app: Record<string, unknown>, body: NewCouponsBody): CodeSpace {
  const settings = { caseSensitivity: String(app.case_sensitivity ?? 'sensitive') };
  // Under an insensitive setting `a` and `A` are one character: the space counts it once.
  const chars = [...new Set(body.validCharacters.map((c) => normalizeCode(settings, c)))];
  return new CodeSpace(normalizeCode(settings, body.uniquePrefix ?? ''), body.couponPattern, chars, (c) => normalizeCode(settings, c));
}

const expiryOf = (body: { expiryDate?: string }): string | null => (body.expiryDate === undefined || noTime(body.expiryDate) ? null : body.expiryDate);

/**
 * Checks a creation body against the Application before anything is written: the count (at most
 * `maxWithoutPrefix` without `uniquePrefix`), the pattern (long enough, with room for the count),
 * the dates and the mandatory attributes.
 */
export function checkNewCoupons(app: Record<string, unknown>, body: NewCouponsBody, maxWithoutPrefix: number): void {
  const prefix = body.uniquePrefix ?? '';
  const n = body.numberOfCoupons;
  if (prefix === '' && n > maxWithoutPrefix) {
    throw badRequest(`At most ${maxWithoutPrefix} coupons per request without \`uniquePrefix\` (${MAX_COUPONS_WITH_PREFIX} with it)`, '/numberOfCoupons');
  }
  if (prefix.length + body.couponPattern.length < MIN_CODE_LENGTH) {
    throw badRequest(`A coupon code has at least ${MIN_CODE_LENGTH} characters: make \`couponPattern\` (with \`uniquePrefix\`) longer`, '/couponPattern');
  }
  const size = codeSpaceOf(app, body).size;
  if (size < n) throw badRequest(`The pattern allows ${size} distinct codes, fewer than the ${n} asked for`, '/couponPattern');
  checkDates(body.startDate, expiryOf(body));
  checkMandatory(app, body.attributes);
}

/** Where new codes go: the batch and the creation time that all of its coupons share. */
export interface CouponBatchTarget {
  applicationId: number;
  campaignId: number;
  batchId: string;
  created: string;
}

/**
 * Inserts `count` new coupons of a checked creation body into a batch, in the caller's
 * transaction. Codes are drawn in JS from crypto randomness without repeating within the call,
 * inserted set-based with ON CONFLICT DO NOTHING, and only the codes already taken in the
 * Application are drawn again. Synchronous creation calls it once; an asynchronous job once per
 * chunk (a new draw each time: codes of earlier chunks are taken codes like any other).
 */
export async function insertCoupons(tx: Queryable, app: Record<string, unknown>, body: NewCouponsBody, target: CouponBatchTarget, count: number): Promise<void> {
  const codes = codeSpaceOf(app, body);
  const fixed = [
    target.applicationId,
    target.campaignId,
    body.usageLimit,
    String(body.discountLimit ?? 0),
    body.startDate ?? null,
    expiryOf(body),
    JSON.stringify(body.attributes ?? {}),
    body.recipientIntegrationId ?? '',
    target.batchId,
    target.created,
    body.reservationLimit ?? 0,
    body.isReservationMandatory ?? false,
    body.implicitlyReserved ?? false,
  ];
  const insert = `WITH ins AS (
      INSERT INTO coupons (application_id, campaign_id, usage_limit, discount_limit, start_date, expiry_date, attributes,
        recipient_integration_id, batch_id, created, created_by, reservation_limit, is_reservation_mandatory, implicitly_reserved, value)
      SELECT $1, $2, $3, $4::numeric, $5::timestamptz, $6::timestamptz, $7::jsonb, $8, $9, $10::timestamptz, 'management_api', $11, $12, $13, v
        FROM jsonb_array_elements_text($14::jsonb) AS v
      ON CONFLICT (application_id, value) DO NOTHING RETURNING 1)
    SELECT count(*)::int AS n FROM ins`;
  // Creations in one Application take turns: two batches racing over the same codes could
  // otherwise wait on each other's uncommitted rows in opposite orders (a deadlock). The unique
  // index alone already keeps codes unique.
  await tx.query(`SELECT pg_advisory_xact_lock($1, $2)`, [CODES_LOCK, target.applicationId]);
  let missing = count;
  while (missing > 0) {
    const fresh = codes.draw(missing);
    if (fresh.length === 0) {
      throw badRequest(`The pattern has no free codes left for ${missing} more coupons in this Application`, '/couponPattern');
    }
    for (let i = 0; i < fresh.length; i += INSERT_CHUNK) {
      const [row] = await tx.query<{ n: number }>(insert, [...fixed, JSON.stringify(fresh.slice(i, i + INSERT_CHUNK))]);
      missing -= row!.n;
    }
  }
}

/**
 * POST .../campaigns/{campaignId}/coupons: one batch of `numberOfCoupons` new codes, all or none
 * (one transaction), with its CouponCreated notifications (pages of 1000) written in the same
 * transaction. The campaign must be the Application's; it need not list the `coupons` feature:
 * the spec does not make that a condition, and sessions accept the coupons of any campaign that
 * is not disabled or archived.
 */
export async function createCoupons(
  ctx: ManagementContext,
  principal: Principal,
  applicationId: number,
  campaignId: number,
  body: NewCouponsBody,
  silent: boolean,
): Promise<{ totalResultSize: number; data: Array<Record<string, unknown>> } | undefined> {
  const app = await requireApplication(ctx.db, principal, applicationId, 'write');
  await requireCampaign(ctx, applicationId, campaignId);
  checkNewCoupons(app, body, MAX_COUPONS);
  const by = await userName(ctx.db, principal);
  const batchId = randomToken(9);
  const at = ctx.clock.now();
  const { out, sent } = await ctx.db.transaction(async (tx) => {
    await insertCoupons(tx, app, body, { applicationId, campaignId, batchId, created: at.toISOString() }, body.numberOfCoupons);
    const sent = await enqueueCouponBatchCreated(
      tx,
      { accountId: principal.accountId, applicationId, campaignId, batchId, typeOfChange: 'management_api', employeeName: by },
      at,
    );
    if (silent) return { out: undefined, sent };
    const rows = await tx.query(`SELECT * FROM coupons WHERE application_id = $1 AND batch_id = $2 ORDER BY id LIMIT ${RESPONSE_COUPONS}`, [
      applicationId,
      batchId,
    ]);
    return { out: { totalResultSize: -1, data: rows.map(couponView) }, sent };
  });
  outboundWritten(ctx, sent);
  return out;
}

/**
 * The codes of a pattern: `prefix` then the pattern with each `#` one of `chars`. Draws never
 * repeat a code within one request: a code that was taken stays taken for the request's life.
 */
class CodeSpace {
  readonly size: number;
  private readonly slots: number;
  private readonly random = new RandomSource();
  // Small enough spaces are sampled without replacement: a lazy Fisher–Yates over the codes'
  // indexes (only moved entries are kept), so even a space that the request fills up ends.
  private readonly exact: boolean;
  private remaining: number;
  private readonly moved = new Map<number, number>();
  // Larger spaces (beyond exact integers) draw characters and skip the codes already seen.
  private readonly seen = new Set<string>();

  constructor(
    private readonly prefix: string,
    private readonly pattern: string,
    private readonly chars: string[],
    private readonly normalize: (code: string) => string,
  ) {
    this.slots = [...pattern].filter((c) => c === '#').length;
    this.size = chars.length ** this.slots;
    this.exact = this.size <= Number.MAX_SAFE_INTEGER;
    this.remaining = this.exact ? this.size : Infinity;
  }

  /** Up to `count` codes never drawn before in this space; fewer only when the space is used up. */
  draw(count: number): string[] {
    const out: string[] = [];
    if (this.exact) {
      while (out.length < count && this.remaining > 0) {
        const j = this.random.below(this.remaining);
        const last = this.remaining - 1;
        const index = this.moved.get(j) ?? j;
        this.moved.set(j, this.moved.get(last) ?? last);
        this.moved.delete(last);
        this.remaining--;
        out.push(this.codeAt(index));
      }
      return out;
    }
    while (out.length < count) {
      let code = this.prefix;
      for (const c of this.pattern) code += c === '#' ? this.chars[this.random.below(this.chars.length)]! : c;
      code = this.normalize(code);
      if (this.seen.has(code)) continue;
      this.seen.add(code);
      out.push(code);
    }
    return out;
  }

  private codeAt(index: number): string {
    let code = this.prefix;
    let rest = index;
    for (const c of this.pattern) {
      if (c !== '#') code += c;
      else {
        code += this.chars[rest % this.chars.length]!;
        rest = Math.floor(rest / this.chars.length);
      }
    }
    return this.normalize(code);
  }
}

/** Uniform integers from crypto randomness, read in blocks (a call per character would be slow for 200,000 codes). */
class RandomSource {
  private buffer = Buffer.alloc(0);
  private offset = 0;

  private uint32(): number {
    if (this.offset + 4 > this.buffer.length) {
      this.buffer = randomBytes(64 * 1024);
      this.offset = 0;
    }
    const v = this.buffer.readUInt32BE(this.offset);
    this.offset += 4;
    return v;
  }

  /** Uniform in [0, bound) for 1 ≤ bound ≤ 2^53, by rejection (no modulo bias). */
  below(bound: number): number {
    if (bound <= 2 ** 32) {
      const limit = 2 ** 32 - (2 ** 32 % bound);
      for (;;) {
        const v = this.uint32();
        if (v < limit) return v % bound;
      }
    }
    const limit = 2 ** 53 - (2 ** 53 % bound);
    for (;;) {
      const v = (this.uint32() & 0x1fffff) * 2 ** 32 + this.uint32();
      if (v < limit) return v % bound;
    }
  }
}

function couponConditions(applicationId: number, campaignId: number, f: CouponFilters, now: string): Conditions {
  const w = new Conditions([applicationId, campaignId]);
  if (f.value !== undefined) {
    if (f.exactMatch) w.add(`lower(value) = lower(${w.p(f.value)})`);
    else w.add(`${FOLDED('value')} LIKE ${w.p(`%${foldCode(f.value)}%`)}`);
  }
  if (f.createdBefore) w.add(`created < ${w.p(f.createdBefore)}::timestamptz`);
  if (f.createdAfter) w.add(`created > ${w.p(f.createdAfter)}::timestamptz`);
  if (f.startsAfter) w.add(`start_date > ${w.p(f.startsAfter)}::timestamptz`);
  if (f.startsBefore) w.add(`start_date < ${w.p(f.startsBefore)}::timestamptz`);
  // A coupon without expiry date never expires: it expires after any time, never before one.
  if (f.expiresAfter) w.add(`(expiry_date IS NULL OR expiry_date > ${w.p(f.expiresAfter)}::timestamptz)`);
  if (f.expiresBefore) w.add(`expiry_date < ${w.p(f.expiresBefore)}::timestamptz`);
  validity(w, f.valid, now);
  if (f.batchId !== undefined) w.add(`batch_id = ${w.p(f.batchId)}`);
  usability(w, f.usable);
  if (f.referralId !== undefined) w.add(`referral_id = ${w.p(f.referralId)}`);
  if (f.recipientIntegrationId !== undefined) w.add(`recipient_integration_id = ${w.p(f.recipientIntegrationId)}`);
  return w;
}

/**
 * Whether the campaign is in a state of the list filter `campaignState`: its one list state, first
 * match wins as in the campaign list (addendum "Campaign list states"): archived, disabled, draft
 * (no active ruleset, whatever its window), expired, scheduled, running.
 */
function inCampaignState(c: Record<string, unknown>, state: string, now: Date): boolean {
  // `enabled` (this list's extra value) is the stored state, whatever the list state.
  if (state === 'enabled') return c.state === 'enabled';
  const start = c.start_time ? new Date(c.start_time as string) : undefined;
  const end = c.end_time ? new Date(c.end_time as string) : undefined;
  const listState =
    c.state === 'archived' || c.state === 'disabled'
      ? c.state
      : c.active_ruleset_id == null
        ? 'draft'
        : end !== undefined && end <= now
          ? 'expired'
          : start !== undefined && start > now
            ? 'scheduled'
            : 'running';
  return listState === state;
}

async function listCouponsPage(
  ctx: ManagementContext,
  principal: Principal,
  applicationId: number,
  campaignId: number,
  query: CouponListQuery,
  withTotal: boolean,
) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  const campaign = await requireCampaign(ctx, applicationId, campaignId);
  const now = ctx.clock.now();
  const w = couponConditions(applicationId, campaignId, query, now.toISOString());
  if (query.campaignState !== undefined && !inCampaignState(campaign, query.campaignState, now)) w.add('FALSE');
  return listPage(
    ctx.db,
    { from: `FROM coupons WHERE application_id = $1 AND campaign_id = $2${w.sql}`, params: w.params, query, sortable: SORTABLE, withTotal },
    couponView,
  );
}

/** GET .../coupons: a page of the campaign's coupons with the total. */
export const listCoupons = (ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, query: CouponListQuery) =>
  listCouponsPage(ctx, principal, applicationId, campaignId, query, true);

/** GET .../coupons/no_total: a page and whether more follow. */
export const listCouponsWithoutTotal = (ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, query: CouponListQuery) =>
  listCouponsPage(ctx, principal, applicationId, campaignId, query, false);

const FILTERS: ReadonlySet<string> = new Set<keyof CouponFilters>([
  'value',
  'exactMatch',
  'createdBefore',
  'createdAfter',
  'startsAfter',
  'startsBefore',
  'expiresAfter',
  'expiresBefore',
  'valid',
  'batchId',
  'usable',
  'referralId',
  'recipientIntegrationId',
]);

/**
 * DELETE .../coupons: the campaign's coupons matching the list filters (every one without a
 * filter). A query parameter that is no filter is refused: a misspelt filter would otherwise be
 * ignored and delete every coupon of the campaign.
 */
export async function deleteCoupons(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, filters: CouponFilters): Promise<number> {
  for (const name of Object.keys(filters)) {
    if (!FILTERS.has(name)) throw badRequest(`Unknown filter ${JSON.stringify(name)}; filters: ${[...FILTERS].join(', ')}`, `/query/${name}`);
  }
  // `exactMatch` only qualifies `value`: alone it filters nothing, and `?exactMatch=true` meant
  // to delete one code would delete them all.
  if (filters.exactMatch !== undefined && filters.value === undefined) {
    throw badRequest('`exactMatch` needs `value`: alone it would delete every coupon of the campaign', '/query/exactMatch');
  }
  // Likewise a `value` with no letter or digit (A-Z, 0-9) that count: it matches every code.
  if (filters.value !== undefined && !filters.exactMatch && foldCode(filters.value) === '') {
    throw badRequest('`value` has no letter or digit (A-Z, 0-9) to match: it would delete every coupon of the campaign', '/query/value');
  }
  await requireApplication(ctx.db, principal, applicationId, 'write');
  await requireCampaign(ctx, applicationId, campaignId);
  const by = await userName(ctx.db, principal);
  const at = ctx.clock.now();
  const w = couponConditions(applicationId, campaignId, filters, at.toISOString());
  const { n, sent } = await ctx.db.transaction(async (tx) => {
    const [row] = await tx.query<{ n: number }>(
      `WITH del AS (DELETE FROM coupons WHERE application_id = $1 AND campaign_id = $2${w.sql} RETURNING 1) SELECT count(*)::int AS n FROM del`,
      w.params,
    );
    const n = row!.n;
    // Spec: TotalResultSize is at least 1; a delete that matched nothing changed nothing.
    if (n === 0) return { n, sent: 0 };
    const body = { ...changeOf('CouponsDeleted', by), BatchID: filters.batchId ?? '', ApplicationID: applicationId, CampaignID: campaignId, TotalResultSize: n };
    return { n, sent: await notify(tx, principal, applicationId, campaignId, 'CouponsDeleted', [body], at) };
  });
  outboundWritten(ctx, sent);
  return n;
}

/** The fields every coupon notification of the Management API starts with. */
const changeOf = (type: string, employeeName: string) => ({ NotificationType: type, Operation: type, TypeOfChange: 'management_api', EmployeeName: employeeName });

function notify(tx: Queryable, principal: Principal, applicationId: number, campaignId: number, type: string, bodies: unknown[], at: Date): Promise<number> {
  return enqueueNotifications(tx, { accountId: principal.accountId, applicationId, campaignId, notificationType: type, bodies }, at);
}

/**
 * UPDATE of coupons of the campaign, those whose `keyColumn` is `key`, with what `body` changes;
 * each updated row returns `bad` (its dates would end before they start) and `returning`.
 */
function updateCouponsSql(keyColumn: 'batch_id' | 'id', body: CouponUpdate, expiry: string | null | undefined, returning: string) {
  return {
    sql: `UPDATE coupons SET
         usage_limit = COALESCE($4, usage_limit),
         discount_limit = COALESCE($5::numeric, discount_limit),
         start_date = COALESCE($6::timestamptz, start_date),
         expiry_date = CASE WHEN $7::boolean THEN $8::timestamptz ELSE expiry_date END,
         attributes = COALESCE($9::jsonb, attributes),
         reservation_limit = COALESCE($10, reservation_limit),
         is_reservation_mandatory = COALESCE($11, is_reservation_mandatory),
         implicitly_reserved = COALESCE($12, implicitly_reserved),
         recipient_integration_id = COALESCE($13, recipient_integration_id)
       WHERE application_id = $1 AND campaign_id = $2 AND ${keyColumn === 'id' ? 'id = $3::bigint' : 'batch_id = $3'}
       RETURNING (start_date IS NOT NULL AND expiry_date IS NOT NULL AND expiry_date <= start_date) AS bad${returning}`,
    params: [
      body.usageLimit ?? null,
      body.discountLimit === undefined ? null : String(body.discountLimit),
      body.startDate ?? null,
      expiry !== undefined,
      expiry ?? null,
      body.attributes ? JSON.stringify(body.attributes) : null,
      body.reservationLimit ?? null,
      body.isReservationMandatory ?? null,
      body.implicitlyReserved ?? null,
      body.recipientIntegrationId ?? null,
    ],
  };
}

/** The dates an update would store, checked as far as the body goes; undefined expiry: unchanged, null: never expires. */
function checkUpdate(app: Record<string, unknown>, body: CouponUpdate): string | null | undefined {
  const expiry = body.expiryDate === undefined ? undefined : noTime(body.expiryDate) ? null : body.expiryDate;
  checkDates(body.startDate, expiry);
  // New attributes replace the old ones whole: they must hold the mandatory ones too.
  if (body.attributes) checkMandatory(app, body.attributes);
  return expiry;
}

const badDates = (body: CouponUpdate, what: string) =>
  badRequest(`\`expiryDate\` must be after \`startDate\` for ${what}`, body.expiryDate !== undefined ? '/expiryDate' : '/startDate');

/** PUT .../coupons: changes every coupon of one batch of the campaign; an unknown batch is a 404. */
export async function updateCouponBatch(
  ctx: ManagementContext,
  principal: Principal,
  applicationId: number,
  campaignId: number,
  body: CouponBatchUpdate,
): Promise<Record<string, never>> {
  const app = await requireApplication(ctx.db, principal, applicationId, 'write');
  await requireCampaign(ctx, applicationId, campaignId);
  const expiry = checkUpdate(app, body);
  const by = await userName(ctx.db, principal);
  const at = ctx.clock.now();
  const sent = await ctx.db.transaction(async (tx: Queryable) => {
    const update = updateCouponsSql('batch_id', body, expiry, '');
    const rows = await tx.query<{ bad: boolean }>(update.sql, [applicationId, campaignId, body.batchID, ...update.params]);
    if (rows.length === 0) throw notFound('Coupon batch', '/batchID');
    // Checked against the stored dates too: a new start after a coupon's expiry (or the reverse) is refused as a whole.
    if (rows.some((r) => r.bad)) throw badDates(body, 'every coupon of the batch');
    const notification = { ...changeOf('CouponsUpdated', by), BatchID: body.batchID, ApplicationID: applicationId, CampaignID: campaignId };
    return notify(tx, principal, applicationId, campaignId, 'CouponsUpdated', [notification], at);
  });
  outboundWritten(ctx, sent);
  return {};
}

/** One coupon of the campaign by its id (a path string of digits; anything else names no coupon). */
function couponKey(couponId: string): string {
  if (!/^[0-9]{1,18}$/.test(couponId)) throw notFound('Coupon', '/couponId');
  return couponId;
}

/** A CouponUpdated or CouponDeleted notification of one coupon. */
function notifyOne(tx: Queryable, principal: Principal, applicationId: number, campaignId: number, type: 'CouponUpdated' | 'CouponDeleted', by: string, coupon: Record<string, unknown>, at: Date) {
  const meta: CouponNotificationMeta = { notificationType: type, typeOfChange: 'management_api', employeeName: by };
  return notify(tx, principal, applicationId, campaignId, type, couponNotificationPages(meta, [couponView(coupon)]), at);
}

/** PUT .../coupons/{couponId}: changes one coupon of the campaign (absent fields stay). */
export async function updateCoupon(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, couponId: string, body: CouponUpdate) {
  const app = await requireApplication(ctx.db, principal, applicationId, 'write');
  await requireCampaign(ctx, applicationId, campaignId);
  const key = couponKey(couponId);
  const expiry = checkUpdate(app, body);
  const by = await userName(ctx.db, principal);
  const at = ctx.clock.now();
  const { row, sent } = await ctx.db.transaction(async (tx) => {
    const update = updateCouponsSql('id', body, expiry, ', *');
    const [row] = await tx.query<Record<string, unknown> & { bad: boolean }>(update.sql, [applicationId, campaignId, key, ...update.params]);
    if (!row) throw notFound('Coupon', '/couponId');
    if (row.bad) throw badDates(body, 'the coupon');
    return { row, sent: await notifyOne(tx, principal, applicationId, campaignId, 'CouponUpdated', by, row, at) };
  });
  outboundWritten(ctx, sent);
  return couponView(row);
}

/** DELETE .../coupons/{couponId}: deletes one coupon of the campaign. */
export async function deleteCoupon(ctx: ManagementContext, principal: Principal, applicationId: number, campaignId: number, couponId: string): Promise<void> {
  await requireApplication(ctx.db, principal, applicationId, 'write');
  await requireCampaign(ctx, applicationId, campaignId);
  const key = couponKey(couponId);
  const by = await userName(ctx.db, principal);
  const at = ctx.clock.now();
  const sent = await ctx.db.transaction(async (tx) => {
    const [row] = await tx.query(`DELETE FROM coupons WHERE application_id = $1 AND campaign_id = $2 AND id = $3::bigint RETURNING *`, [applicationId, campaignId, key]);
    if (!row) throw notFound('Coupon', '/couponId');
    return notifyOne(tx, principal, applicationId, campaignId, 'CouponDeleted', by, row, at);
  });
  outboundWritten(ctx, sent);
}
