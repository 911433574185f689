// Loyalty programs and their ledgers, Management side (service-spec "Loyalty program and ledger
// (Management)", addendum ext create/update). Programs belong to the account; a profile's ledger
// in a program is a main ledger plus optional subledgers, each a list of transactions.
//
// Balances are never stored as one number: every addition (a grant) keeps what is left of it
// (`remaining`), and the active balance at a time t is the sum of what is left of the grants
// active at t. Pending points thus become active, and points expire, without any write at that
// moment; the `expire` transaction of a grant is written by the next change of its ledger (and
// shown the same way before that). Every change of a ledger first locks its loyalty_ledgers row,
// so deductions racing for the same points are applied one at a time and a balance never goes
// below zero. Later writers (session close, events, expiry jobs) must use lockLedger the same way.
import { AppError, badRequest, notFound } from '../shared/index.js';
import {
  addDuration,
  checkTier,
  grantPoints,
  isUniqueViolation,
  lockLedger,
  loyaltySubscriptions,
  netOfDebt,
  notifyPointsChanges,
  payDebts,
  settleLedger,
  spendPoints,
  subscribes,
  type LedgerKey,
  type PointsChange,
  type Queryable,
} from '../store/index.js';
// The ledger primitives live in the store (the Integration use cases write ledgers too).
export { addDuration, grantPoints, isDuration, lockLedger, settleExpired, spendPoints, type Grant, type LedgerKey } from '../store/index.js';
import { compact, isAdmin, iso, listPage, outboundWritten, requireAdmin, userName, visibleApplicationIds, type ListQuery, type ManagementContext, type Principal } from './context.js';

// ---- programs ----

export interface LoyaltyTier {
  name: string;
  minPoints: number;
}

export interface LoyaltyProgramBody {
  name?: string;
  title?: string;
  description?: string;
  subscribedApplications?: number[];
  defaultValidity?: string;
  defaultPending?: string;
  allowSubledger?: boolean;
  tiers?: LoyaltyTier[];
  cardBased?: boolean;
  usersPerCardLimit?: number;
  allowNegativeBalance?: boolean;
  expiringPointsNotice?: string;
}

/** The program with the ids of its subscribed Applications, for `FROM loyalty_programs`. */
const programSelect = `loyalty_programs.*, COALESCE((SELECT jsonb_agg(a.application_id ORDER BY a.application_id)
  FROM loyalty_program_applications a WHERE a.program_id = loyalty_programs.id), '[]'::jsonb) AS subscribed_applications`;

export function loyaltyProgramView(r: Record<string, unknown>): Record<string, unknown> {
  return compact({
    id: r.id as number,
    created: iso(r.created),
    modified: iso(r.modified),
    accountID: r.account_id as number,
    name: r.name as string,
    title: r.title as string,
    description: r.description as string,
    subscribedApplications: (r.subscribed_applications as number[] | null) ?? [],
    defaultValidity: r.default_validity as string,
    defaultPending: r.default_pending as string,
    allowSubledger: r.allow_subledger as boolean,
    tiers: r.tiers as LoyaltyTier[],
    cardBased: r.card_based as boolean,
    usersPerCardLimit: (r.users_per_card_limit as number | null) ?? undefined,
    allowNegativeBalance: r.allow_negative_balance as boolean,
    expiringPointsNotice: r.expiring_points_notice as string,
  });
}

/** A program's view as the caller may see it: only the subscribed Applications its policy names. */
export function programForViewer(principal: Principal, view: Record<string, unknown>): Record<string, unknown> {
  return { ...view, subscribedApplications: visibleApplicationIds(principal, view.subscribedApplications as number[]) };
}

/** The programs an Application subscribes to (the Application view's `loyaltyPrograms`). */
export async function loyaltyProgramsOfApplication(db: Queryable, applicationId: number): Promise<Record<string, unknown>[]> {
  return (await loyaltyProgramsOfApplications(db, [applicationId])).get(applicationId) ?? [];
}

/** The programs of several Applications in one query (a page of Applications), by Application id. */
export async function loyaltyProgramsOfApplications(db: Queryable, applicationIds: readonly number[]): Promise<Map<number, Record<string, unknown>[]>> {
  const out = new Map<number, Record<string, unknown>[]>();
  if (applicationIds.length === 0) return out;
  const rows = await db.query(
    `SELECT s.application_id AS for_application, p.* FROM (SELECT ${programSelect} FROM loyalty_programs) p
       JOIN loyalty_program_applications s ON s.program_id = p.id
      WHERE s.application_id = ANY($1::int[]) ORDER BY p.id`,
    [applicationIds],
  );
  for (const { for_application, ...row } of rows) {
    const id = Number(for_application);
    out.set(id, [...(out.get(id) ?? []), loyaltyProgramView(row)]);
  }
  return out;
}

export async function findProgram(db: Queryable, principal: Principal, programId: number, lock = false): Promise<Record<string, unknown>> {
  const [row] = await db.query(`SELECT ${programSelect} FROM loyalty_programs WHERE id = $1 AND account_id = $2${lock ? ' FOR UPDATE' : ''}`, [
    programId,
    principal.accountId,
  ]);
  if (!row) throw notFound('Loyalty program', '/programID');
  return row;
}

/** Checks what the body says beyond its schema, on the program as it will be after the change. */
async function checkProgram(db: Queryable, principal: Principal, body: LoyaltyProgramBody, cardBased: boolean): Promise<void> {
  if (body.defaultValidity !== undefined && body.defaultValidity !== 'unlimited') addDuration(new Date(0), body.defaultValidity, '/defaultValidity');
  if (body.defaultPending !== undefined && body.defaultPending !== 'immediate') addDuration(new Date(0), body.defaultPending, '/defaultPending');
  if (body.expiringPointsNotice !== undefined) addDuration(new Date(0), body.expiringPointsNotice, '/expiringPointsNotice');
  const seen = new Set<string>();
  (body.tiers ?? []).forEach((tier, i) => {
    if (seen.has(tier.name)) throw badRequest(`Tier name ${JSON.stringify(tier.name)} is used twice`, `/tiers/${i}/name`);
    seen.add(tier.name);
    const before = body.tiers![i - 1];
    if (before && tier.minPoints <= before.minPoints) {
      throw badRequest('Tiers must be listed by ascending minPoints, each above the one before', `/tiers/${i}/minPoints`);
    }
  });
  if (body.usersPerCardLimit !== undefined && !cardBased) throw badRequest('usersPerCardLimit applies only to card-based programs', '/usersPerCardLimit');
  const ids = body.subscribedApplications ?? [];
  if (ids.length > 0) {
    const rows = await db.query<{ id: number }>(
      `SELECT id FROM applications WHERE account_id = $1 AND id IN (SELECT jsonb_array_elements_text($2::jsonb)::int)`,
      [principal.accountId, JSON.stringify(ids)],
    );
    const known = new Set(rows.map((r) => r.id));
    ids.forEach((id, i) => {
      if (!known.has(id)) throw badRequest(`Application ${id} not found`, `/subscribedApplications/${i}`);
    });
  }
}

/**
 * Subscribes exactly these Applications (of the account: one deleted meanwhile is skipped; the
 * rows are locked as they are read, so that one whose delete commits meanwhile is skipped rather
 * than failing the foreign key).
 */
async function setSubscriptions(tx: Queryable, principal: Principal, programId: number, ids: number[]): Promise<void> {
  await tx.query(`DELETE FROM loyalty_program_applications WHERE program_id = $1`, [programId]);
  await tx.query(
    `INSERT INTO loyalty_program_applications (program_id, application_id)
     SELECT $1, id FROM applications WHERE account_id = $2 AND id IN (SELECT jsonb_array_elements_text($3::jsonb)::int)
     FOR KEY SHARE
     ON CONFLICT DO NOTHING`,
    [programId, principal.accountId, JSON.stringify(ids)],
  );
}

const nameTaken = (name: string): AppError =>
  new AppError('conflict', `A loyalty program named ${JSON.stringify(name)} already exists`, [
    { title: 'Conflict', details: `loyalty program ${name} already exists in this account`, source: { pointer: '/name' } },
  ]);

/** POST /v1/loyalty_programs (ext): admins only; the name is unique in the account (409). */
export async function createLoyaltyProgram(ctx: ManagementContext, principal: Principal, body: LoyaltyProgramBody & { name: string; title: string }) {
  requireAdmin(principal);
  await checkProgram(ctx.db, principal, body, body.cardBased ?? false);
  const now = ctx.clock.now().toISOString();
  try {
    const id = await ctx.db.transaction(async (tx) => {
      const [row] = await tx.query<{ id: number }>(
        `INSERT INTO loyalty_programs (account_id, created, modified, name, title, description, default_validity, default_pending,
           allow_subledger, tiers, card_based, users_per_card_limit, allow_negative_balance, expiring_points_notice)
         VALUES ($1, $2, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11, $12, $13)
         ON CONFLICT (account_id, name) DO NOTHING RETURNING id`,
        [
          principal.accountId,
          now,
          body.name,
          body.title,
          body.description ?? '',
          body.defaultValidity ?? 'unlimited',
          body.defaultPending ?? 'immediate',
          body.allowSubledger ?? false,
          JSON.stringify(body.tiers ?? []),
          body.cardBased ?? false,
          body.usersPerCardLimit ?? null,
          body.allowNegativeBalance ?? false,
          body.expiringPointsNotice ?? '7D',
        ],
      );
      if (!row) throw nameTaken(body.name);
      await setSubscriptions(tx, principal, row.id, body.subscribedApplications ?? []);
      return row.id;
    });
    return loyaltyProgramView(await findProgram(ctx.db, principal, id));
  } catch (e) {
    throw isUniqueViolation(e) ? nameTaken(body.name) : e;
  }
}

/** PUT /v1/loyalty_programs/{programID} (ext): admins only; absent fields keep their value. */
export async function updateLoyaltyProgram(ctx: ManagementContext, principal: Principal, programId: number, body: LoyaltyProgramBody) {
  requireAdmin(principal);
  try {
    await ctx.db.transaction(async (tx) => {
      const current = await findProgram(tx, principal, programId, true);
      await checkProgram(tx, principal, body, body.cardBased ?? (current.card_based as boolean));
      const [row] = await tx.query(
        `UPDATE loyalty_programs SET name = COALESCE($2, name), title = COALESCE($3, title), description = COALESCE($4, description),
           default_validity = COALESCE($5, default_validity), default_pending = COALESCE($6, default_pending),
           allow_subledger = COALESCE($7, allow_subledger), tiers = COALESCE($8::jsonb, tiers), card_based = COALESCE($9, card_based),
           users_per_card_limit = CASE WHEN $9::boolean IS FALSE THEN NULL ELSE COALESCE($10, users_per_card_limit) END,
           modified = $11, allow_negative_balance = COALESCE($12, allow_negative_balance),
           expiring_points_notice = COALESCE($13, expiring_points_notice)
         WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM loyalty_programs o WHERE o.account_id = loyalty_programs.account_id AND o.name = $2 AND o.id <> $1)
         RETURNING id`,
        [
          programId,
          body.name ?? null,
          body.title ?? null,
          body.description ?? null,
          body.defaultValidity ?? null,
          body.defaultPending ?? null,
          body.allowSubledger ?? null,
          body.tiers ? JSON.stringify(body.tiers) : null,
          body.cardBased ?? null,
          body.usersPerCardLimit ?? null,
          ctx.clock.now().toISOString(),
          body.allowNegativeBalance ?? null,
          body.expiringPointsNotice ?? null,
        ],
      );
      if (!row) throw nameTaken(body.name ?? '');
      if (body.subscribedApplications) await setSubscriptions(tx, principal, programId, body.subscribedApplications);
    });
  } catch (e) {
    throw isUniqueViolation(e) ? nameTaken(body.name ?? '') : e;
  }
  return loyaltyProgramView(await findProgram(ctx.db, principal, programId));
}

/** GET /v1/loyalty_programs: every user of the account sees its programs. */
export async function listLoyaltyPrograms(ctx: ManagementContext, principal: Principal, query: ListQuery) {
  return listPage(
    ctx.db,
    {
      from: `FROM loyalty_programs WHERE account_id = $1`,
      params: [principal.accountId],
      query,
      sortable: { id: 'id', name: 'name', title: 'title', created: 'created', modified: 'modified' },
      withTotal: true,
      select: programSelect,
    },
    (row) => programForViewer(principal, loyaltyProgramView(row)),
  );
}

export async function getLoyaltyProgram(ctx: ManagementContext, principal: Principal, programId: number) {
  return programForViewer(principal, loyaltyProgramView(await findProgram(ctx.db, principal, programId)));
}

// ---- ledgers ----

async function findProfile(db: Queryable, principal: Principal, integrationId: string): Promise<number> {
  const [row] = await db.query<{ id: number }>(`SELECT id FROM customer_profiles WHERE account_id = $1 AND integration_id = $2`, [
    principal.accountId,
    integrationId,
  ]);
  if (!row) throw notFound('Customer profile', '/integrationID');
  return Number(row.id);
}

/** Admins, or users who may write one of the program's subscribed Applications. */
export function requireLedgerWriter(principal: Principal, program: Record<string, unknown>): void {
  if (isAdmin(principal)) return;
  const subscribed = (program.subscribed_applications as number[] | null) ?? [];
  const grants = principal.policy.applications ?? {};
  if (subscribed.some((id) => grants[String(id)] === 'write')) return;
  throw new AppError('permission_denied', 'This user may not change ledgers of this loyalty program', [
    { title: 'Forbidden', details: 'admin role, or write access to an Application subscribed to the program, is required', source: { pointer: '/programID', parameter: 'programID' } },
  ]);
}

/**
 * Admins, or users who may read one of the program's subscribed Applications: a customer's ledger
 * is data of the Applications that earn and spend its points, not of the whole account.
 */
export function requireLedgerReader(principal: Principal, program: Record<string, unknown>): void {
  if (isAdmin(principal)) return;
  const subscribed = (program.subscribed_applications as number[] | null) ?? [];
  const grants = principal.policy.applications ?? {};
  if (subscribed.some((id) => grants[String(id)] !== undefined)) return;
  throw new AppError('permission_denied', 'This user may not read ledgers of this loyalty program', [
    { title: 'Forbidden', details: 'admin role, or access to an Application subscribed to the program, is required', source: { pointer: '/programID', parameter: 'programID' } },
  ]);
}

function subledgerOf(program: Record<string, unknown>, subLedgerID: string | undefined): string {
  if (subLedgerID === undefined) return '';
  if (!program.allow_subledger) throw badRequest('This loyalty program has no subledgers (allowSubledger is false)', '/subLedgerID');
  return subLedgerID;
}

export interface AddPointsBody {
  points: number;
  name?: string;
  expiryDuration?: string;
  pendingDuration?: string;
  subLedgerID?: string;
}

/**
 * PUT .../add_points: pending for pendingDuration (default the program's defaultPending), then
 * active for expiryDuration (default defaultValidity) counted from the start.
 */
export async function addLoyaltyPoints(ctx: ManagementContext, principal: Principal, programId: number, integrationId: string, body: AddPointsBody): Promise<void> {
  const program = await findProgram(ctx.db, principal, programId);
  requireLedgerWriter(principal, program);
  const subledgerId = subledgerOf(program, body.subLedgerID);
  const now = ctx.clock.now();
  const pending = body.pendingDuration ?? (program.default_pending as string);
  const startDate = pending === 'immediate' ? now : addDuration(now, pending, '/pendingDuration');
  const validity = body.expiryDuration ?? (program.default_validity as string);
  const expiryDate = validity === 'unlimited' ? null : addDuration(startDate, validity, '/expiryDuration');
  const profileId = await findProfile(ctx.db, principal, integrationId);
  const key = { programId, profileId, subledgerId };
  const written = await ctx.db.transaction(async (tx) => {
    await lockLedger(tx, key, { integrationId, now, create: true });
    await settleLedger(tx, key, now);
    const id = await grantPoints(tx, key, { points: body.points, name: body.name ?? '', startDate, expiryDate, userId: principal.userId, now });
    // Points active at once pay the ledger's debts before they can be spent.
    await payDebts(tx, key, now);
    return notifyLedgerChange(tx, principal, key, { notificationType: 'LoyaltyPointsAdded', amount: body.points, reason: body.name ?? '', transactionId: id, startDate, expiryDate }, integrationId, now);
  });
  outboundWritten(ctx, written);
}

/**
 * LoyaltyPointsAdded / Deducted of a Management change and, when it moved the tier, TierUpgrade /
 * TierDowngrade, in its transaction under the ledger's lock, for the program's subscribers only.
 */
async function notifyLedgerChange(
  tx: Queryable,
  principal: Principal,
  key: LedgerKey,
  change: Pick<PointsChange, 'notificationType' | 'amount' | 'reason' | 'transactionId' | 'startDate' | 'expiryDate'>,
  integrationId: string,
  now: Date,
): Promise<number> {
  const subs = await loyaltySubscriptions(tx, [key.programId]);
  if (subs.size === 0) return 0;
  let written = await notifyPointsChanges(
    tx,
    [
      {
        ...change,
        programId: key.programId,
        subledgerId: key.subledgerId,
        profileIntegrationId: integrationId,
        typeOfChange: 'management_api',
        employeeName: await userName(tx, principal),
        userId: principal.userId,
        sessionIntegrationId: '',
        created: now,
      },
    ],
    subs,
    now,
  );
  if (subscribes(subs, key.programId, 'TierUpgrade', 'TierDowngrade')) written += await checkTier(tx, key, now);
  return written;
}

export interface DeductPointsBody {
  points: number;
  name?: string;
  subLedgerID?: string;
}

/**
 * PUT .../deduct_points: more than the active balance is a 400 on /points, and nothing changes,
 * unless the program allows a negative balance: then what the active points do not cover is a
 * debt (the ledger, or the subledger, is opened for it when missing).
 */
export async function deductLoyaltyPoints(ctx: ManagementContext, principal: Principal, programId: number, integrationId: string, body: DeductPointsBody): Promise<void> {
  const program = await findProgram(ctx.db, principal, programId);
  requireLedgerWriter(principal, program);
  const subledgerId = subledgerOf(program, body.subLedgerID);
  const allowNegative = program.allow_negative_balance === true;
  const now = ctx.clock.now();
  const profileId = await findProfile(ctx.db, principal, integrationId);
  const key = { programId, profileId, subledgerId };
  const written = await ctx.db.transaction(async (tx) => {
    if (!(await lockLedger(tx, key, { integrationId, now, create: allowNegative }))) {
      if (subledgerId !== '') throw badRequest(`The profile has no subledger ${JSON.stringify(subledgerId)} in this program`, '/subLedgerID');
      throw insufficient(body.points);
    }
    await settleLedger(tx, key, now);
    const id = await spendPoints(tx, key, { points: body.points, name: body.name ?? '', userId: principal.userId, now, allowNegative });
    if (id === null) throw insufficient(body.points);
    return notifyLedgerChange(tx, principal, key, { notificationType: 'LoyaltyPointsDeducted', amount: body.points, reason: body.name ?? '', transactionId: id }, integrationId, now);
  });
  outboundWritten(ctx, written);
}

const insufficient = (points: number): AppError =>
  new AppError('invalid_argument', `The active balance is smaller than ${points} points`, [
    { title: 'InsufficientPoints', details: `deducting ${points} points needs an active balance of at least ${points}`, source: { pointer: '/points' } },
  ]);

/** Sums of decimal points are added as doubles: drop the binary noise (0.1 + 0.2). */
const round = (x: number): number => Math.round(x * 1e9) / 1e9;

function entryView(r: Record<string, unknown>, programId: number, integrationId: string, override: Partial<Record<string, unknown>> = {}) {
  return compact({
    created: iso(r.created),
    programID: programId,
    customerProfileID: integrationId,
    customerSessionID: (r.customer_session_id as string) || undefined,
    eventID: r.event_id === null || r.event_id === undefined ? undefined : Number(r.event_id),
    type: r.type as string,
    amount: Number(r.amount),
    startDate: iso(r.start_date),
    expiryDate: iso(r.expiry_date),
    name: r.name as string,
    subLedgerID: r.subledger_id as string,
    userID: (r.user_id as number | null) ?? undefined,
    ...override,
  });
}

/**
 * GET .../profile/{integrationID}: the main ledger and each subledger, as of now. `total` is the
 * active balance; expired grants whose `expire` transaction is not written yet show it already.
 */
export async function getLoyaltyPoints(ctx: ManagementContext, principal: Principal, programId: number, integrationId: string) {
  requireLedgerReader(principal, await findProgram(ctx.db, principal, programId));
  const profileId = await findProfile(ctx.db, principal, integrationId);
  const now = ctx.clock.now();
  const rows = await ctx.db.query(
    `SELECT type, subledger_id, created, start_date, expiry_date, name, customer_session_id, event_id, user_id,
       amount::float8 AS amount, remaining::float8 AS remaining, uncovered::float8 AS uncovered
     FROM loyalty_transactions
     WHERE program_id = $1 AND profile_id = $2 ORDER BY created, id`,
    [programId, profileId],
  );
  const ledgers = await ctx.db.query<{ subledger_id: string }>(`SELECT subledger_id FROM loyalty_ledgers WHERE program_id = $1 AND profile_id = $2`, [
    programId,
    profileId,
  ]);
  const bySubledger = new Map<string, Record<string, unknown>[]>([['', []]]);
  for (const l of ledgers) if (!bySubledger.has(l.subledger_id)) bySubledger.set(l.subledger_id, []);
  for (const r of rows) bySubledger.get(r.subledger_id as string)?.push(r);

  const t = now.getTime();
  const time = (v: unknown) => (v instanceof Date ? v : new Date(String(v))).getTime();
  const view = (txs: Record<string, unknown>[]) => {
    let active = 0;
    let pending = 0;
    let spent = 0;
    let expired = 0;
    let debt = 0;
    const transactions: { at: number; entry: Record<string, unknown> }[] = [];
    const expiring: { at: number; entry: Record<string, unknown> }[] = [];
    for (const r of txs) {
      transactions.push({ at: time(r.created), entry: entryView(r, programId, integrationId) });
      const remaining = Number(r.remaining ?? 0);
      if (r.type === 'subtraction') {
        spent += Number(r.amount);
        debt += Number(r.uncovered ?? 0);
      }
      else if (r.type === 'expire') expired += Number(r.amount);
      else if (remaining > 0) {
        const expiry = r.expiry_date === null || r.expiry_date === undefined ? null : time(r.expiry_date);
        if (time(r.start_date) > t) pending += remaining;
        else if (expiry !== null && expiry <= t) {
          // Expired, and not settled yet: shown as its settlement will write it.
          expired += remaining;
          const at = iso(r.expiry_date);
          transactions.push({ at: expiry, entry: entryView(r, programId, integrationId, { type: 'expire', amount: remaining, created: at, startDate: at, userID: undefined, customerSessionID: undefined, eventID: undefined }) });
        } else {
          active += remaining;
          if (expiry !== null) expiring.push({ at: expiry, entry: entryView(r, programId, integrationId, { type: 'expiring', amount: remaining }) });
        }
      }
    }
    transactions.sort((a, b) => a.at - b.at);
    expiring.sort((a, b) => a.at - b.at);
    // Active points pay debts first (see payDebts); until their ledger is settled, shown as if paid.
    const { activePoints, negativePoints } = netOfDebt(active, debt);
    return {
      total: activePoints,
      totalActivePoints: activePoints,
      totalPendingPoints: round(pending),
      totalSpentPoints: round(spent),
      totalExpiredPoints: round(expired),
      totalNegativePoints: negativePoints,
      transactions: transactions.map((x) => x.entry),
      expiringPoints: expiring.map((x) => x.entry),
    };
  };
  const subLedgers: Record<string, ReturnType<typeof view>> = {};
  for (const [id, txs] of bySubledger) if (id !== '') subLedgers[id] = view(txs);
  return { ledger: view(bySubledger.get('')!), subLedgers };
}
