import type { AppRef, GetSessionCall, JsonObject, ReopenSessionCall, ReturnSessionCall, UpdateSessionCall } from '../actors/port.js';
import { currencyDigits, fromMinor, rollbackEffects, toMinor, type Effect, type EvaluationResult } from '../engine/index.js';
import { addExact, AppError, badRequest, GroupCommit, notFound, sumProducts, tooManyConcurrent } from '../shared/index.js';
import { againOnConflict, type Queryable } from '../store/index.js';
import { attributeUpdates, commitEffects, CommitRaceError, statisticsOnly, type EffectsCommit, couponView, DISCOUNT_EFFECTS, referralView, rollbackCounters, type CounterEntry, type LedgerEntrySink, type LedgerWrite } from './commit-effects.js';
import { integrationState, previewCreated, withLedgerEntries } from './customer-records.js';
import { priceFromCatalogs, recordCartPrices } from './catalogs.js';
import { IntegrationService, type EvaluationOutcome, type IntegrationServiceOptions } from './evaluation.js';
import { remember, type IdempotencyScope } from './idempotency.js';
import {
  commitSession,
  commitSessionsTogether,
  loadProfile,
  loadProfileContext,
  loadSession,
  StaleSessionError,
  type EventRecord,
  type ProfileRecord,
  type SessionCommit,
  type SessionCommitResult,
} from './repository.js';
import { applyPayload, checkTransition, emptySession, sessionView, withTotals, type CartItem, type SessionPayload, type SessionRecord } from './session-model.js';
import type { AppSnapshot } from './snapshot.js';

export type { Evaluator } from './evaluation.js';

export type SessionServiceOptions = IntegrationServiceOptions;

export interface SessionUpdateOutcome {
  state: JsonObject;
  /** The session as committed; absent for dry runs and replays (nothing changed). */
  committed?: SessionRecord;
}

/** Retries of one call when the stored session moved (stale cache) or a counter ran out under it. */
const MAX_RETRIES = 20;

const EMPTY_RESULT: EvaluationResult = { effects: [], ruleFailureReasons: [], triggeredCampaignIds: [] };

/** A replayed response changes nothing: no session to cache. */
const replayedOutcome = (state: JsonObject): SessionUpdateOutcome => ({ state });

interface Extras {
  createdCoupons?: Array<Record<string, unknown>>;
  createdReferrals?: Array<Record<string, unknown>>;
  returned?: Record<string, unknown>;
}

/** Session use cases: update (evaluate and commit), returns, reopen and read. Called by the session's actor. */
export class SessionService extends IntegrationService {
  private readonly sessionWrites: GroupCommit<SessionCommit, SessionCommitResult>;

  constructor(options: SessionServiceOptions) {
    super(options);
    this.sessionWrites = new GroupCommit<SessionCommit, SessionCommitResult>({
      one: (c) => commitSession(this.db, c),
      // A batch is one statement: when PostgreSQL aborts it in a deadlock, nothing of it stays and
      // it runs again. Batches never deadlock with each other (SESSIONS_TOGETHER_SQL), but a
      // transaction that commits a close with more (loyalty points to another profile, say) locks
      // its profiles in an order of its own, and either side may be the one aborted.
      many: (cs) => againOnConflict(() => commitSessionsTogether(this.db, cs)),
      // Under load a batch waits up to 1 ms for a dozen updates: at 0.3x the bare endpoint's rate
      // (`npm run bench:api`, open-loop row, six runs each way) PostgreSQL's CPU per update fell
      // from 0.16-0.18 to 0.14-0.16 ms and the server's from 0.17-0.18 to 0.15-0.17 ms, for about
      // 1.5 ms more at the median.
      gather: { items: 12 },
      // Two batches at a time: while one waits for its commit (a WAL flush takes 10-20 ms at
      // times on a VM's disk), the next is already sent instead of every update queueing behind
      // it. Every batch writes its profiles in one upsert in key order (SESSIONS_TOGETHER_SQL), so
      // two never deadlock over profiles they share. In the bench's open loop (4 interleaved runs
      // each, pretenuring off) the p99 went from 24-101 ms (median 29) to 22-39 ms (median 28),
      // the p50 from 5.9-20 to 5.1-7.2 ms, and the saturated row from 0.44-0.49x to 0.49-0.51x bare.
      maxInFlight: 2,
    });
  }

  /**
   * Updates (or creates) a session. `cached` is the session as this actor last committed it; it is
   * trusted first and re-read from Postgres when the commit finds it stale.
   */
  async update(call: UpdateSessionCall, cached: SessionRecord | undefined): Promise<SessionUpdateOutcome> {
    const request = call.request as { customerSession?: SessionPayload; responseContent?: string[] };
    const payload = request.customerSession ?? {};
    const responseContent = new Set(request.responseContent ?? []);
    const now = this.evaluationTime(call);
    if (call.dry) return { state: await this.dryRun(call.app, call.customerSessionId, cached, payload, responseContent, now) };
    const scope = this.scopeOf(call.app, call.idempotencyKey, `updateSession:${call.customerSessionId}`, { request: call.request });
    return this.idempotent(
      scope,
      () =>
        this.withRetries(
          call.app,
          call.customerSessionId,
          cached,
          (stored) => this.updateOnce(call.app, call.customerSessionId, stored, payload, responseContent, now, scope, call.requestUuid),
          { assumeNew: true },
        ),
      replayedOutcome,
    );
  }

  /** POST .../returns: items of a closed session come back; the effects tied to them are rolled back pro rata. */
  async returns(call: ReturnSessionCall, cached: SessionRecord | undefined): Promise<SessionUpdateOutcome> {
    const request = call.request as { return?: { returnedCartItems?: Array<{ position: number; quantity?: number }> }; responseContent?: string[] };
    const responseContent = new Set(request.responseContent ?? []);
    const items = request.return?.returnedCartItems ?? [];
    const now = this.clock.now();
    const scope = this.scopeOf(call.app, call.idempotencyKey, `returnSession:${call.customerSessionId}`, { request: call.request, dry: call.dry, runRuleEngine: call.runRuleEngine });
    const run = async (stored: SessionRecord | undefined): Promise<SessionUpdateOutcome> => {
      if (!stored) throw notFound('Customer session', '/path/customerSessionId');
      if (stored.state !== 'closed' && stored.state !== 'partially_returned') {
        throw badRequest(`Only a closed session can have returns; this one is ${stored.state}`, '/return', 'InvalidSessionStateTransition');
      }
      const snapshot = await this.snapshots.get(call.app.applicationId);
      const digits = currencyDigits(snapshot.application.currency);
      const round = (n: number) => fromMinor(toMinor(n, digits), digits);
      const returned = returnedLines(stored.cartItems, items);
      // What the customer gets back (lines with their own additional costs) lowers the profile's
      // sales; session-wide amounts go back by the returned share of the items, as they were
      // computed on the items.
      const amount = returned.reduce((s, r) => addExact(s, r.amount), 0);
      const itemAmount = returned.reduce((s, r) => addExact(s, r.itemAmount), 0);
      const share = stored.cartItemTotal > 0 ? Math.min(1, itemAmount / stored.cartItemTotal) : 1;
      const committed = stored.committedEffects as Effect[];
      const cartItems = stored.cartItems
        .map((i) => ({ ...i, quantity: i.quantity - (returned.find((r) => r.position === i.position)?.quantity ?? 0) }))
        .filter((i) => i.quantity > 0);
      // Campaigns that ask for it are evaluated again on what was kept; the others give back pro rata.
      const again = call.runRuleEngine
        ? snapshot.campaigns.filter((c) => c.reevaluateOnReturn && committed.some((e) => e.campaignId === c.id)).map((c) => c.id)
        : [];
      const proRata = committed.filter((e) => !again.includes(e.campaignId));
      const rollback = returnRollback(proRata, returned, share, round);
      const nextCommitted = remainingAfter(proRata, rollback);
      const applied: Effect[] = [];
      // What each campaign's counters give back: the share of its discounts that the rollback
      // effects return (per-item discounts need not follow the prices of the lines).
      const sumOf = (es: readonly Effect[]) => es.filter((e) => DISCOUNT_EFFECTS.has(e.effectType)).reduce((t, e) => addExact(t, e.props.value as number), 0);
      const shares = new Map<number, number>();
      for (const id of new Set(proRata.map((e) => e.campaignId))) {
        const given = sumOf(proRata.filter((e) => e.campaignId === id));
        const back = rollback.filter((e) => e.campaignId === id && e.effectType === 'rollbackDiscount').reduce((t, e) => addExact(t, e.props.value as number), 0);
        shares.set(id, given > 0 ? back / given : share);
      }
      if (again.length > 0) {
        const kept = withTotals({ ...stored, cartItems });
        const profile = stored.profileId ? await loadProfile(this.db, call.app.accountId, stored.profileId) : undefined;
        const outcome = await this.evaluation.run({
          applicationId: call.app.applicationId,
          session: kept,
          profile,
          event: { type: `${this.prefix}session_updated`, attributes: {} },
          now,
          onlyCampaignIds: again,
          own: stored.committedCounters as CounterEntry[],
        });
        for (const id of again) {
          const before = committed.filter((e) => e.campaignId === id && DISCOUNT_EFFECTS.has(e.effectType));
          const after = outcome.effects.filter((e) => e.campaignId === id && DISCOUNT_EFFECTS.has(e.effectType));
          const old = sumOf(before);
          shares.set(id, old > 0 ? Math.max(0, (old - sumOf(after)) / old) : 0);
          rollback.push(...rollbackEffects(before));
          applied.push(...after);
          nextCommitted.push(...committed.filter((e) => e.campaignId === id && !DISCOUNT_EFFECTS.has(e.effectType)), ...after);
        }
      }
      const effects = [...rollback, ...applied];
      const session: SessionRecord = withTotals({
        ...stored,
        state: 'partially_returned',
        cartItems,
        committedEffects: nextCommitted,
        effects,
      });
      const returnRecord = { returnedCartItems: returned.map((r) => ({ position: r.position, quantity: r.quantity })), amount };
      const state = (c: SessionRecord, profile: ProfileRecord | undefined, event: EventRecord | undefined, previous: unknown[]) =>
        this.stateOf(snapshot, c, profile, event, { ...EMPTY_RESULT, effects }, responseContent, { returned: returnRecord }, previous);
      if (call.dry) {
        const profile = stored.profileId ? await loadProfile(this.db, call.app.accountId, stored.profileId) : undefined;
        return { state: state(session, profile, undefined, []) };
      }
      let ledger: LedgerEntrySink | undefined;
      const write = async (t: Queryable) => {
        ledger = { entries: [], profileId: stored.profileId, accountId: call.app.accountId };
        session.committedCounters = await rollbackCounters(t, stored.committedCounters as CounterEntry[], { share: (id) => shares.get(id) ?? share, keepCounts: true, round, now, ledger });
        const c = await commitSession(t, {
          accountId: call.app.accountId,
          session,
          expectedUpdateCount: stored.updateCount,
          closing: false,
          profileDelta: { closedSessions: 0, totalSales: -amount },
          now: now.toISOString(),
          events: [{ type: `${this.prefix}session_updated`, attributes: {}, effects }],
        });
        await t.query(
          `INSERT INTO session_returns (application_id, session_id, created, returned_cart_items, amount, effects) VALUES ($1, $2, $3, $4::jsonb, $5::numeric, $6::jsonb)`,
          [call.app.applicationId, stored.integrationId, now.toISOString(), JSON.stringify(returnRecord.returnedCartItems), String(amount), JSON.stringify(effects)],
        );
        const previous = await t.query(
          `SELECT id, created, returned_cart_items, amount, effects FROM session_returns WHERE application_id = $1 AND session_id = $2 ORDER BY id`,
          [call.app.applicationId, stored.integrationId],
        );
        const [event] = await withLedgerEntries(t, c.events, `${this.prefix}session_updated`, ledger.entries);
        const out = state(c.session, c.profile, event, previous.slice(0, -1).map(returnView));
        if (scope) await remember(t, scope, out, this.clock);
        return { state: out, committed: c.session };
      };
      const done = await this.db.transaction(write);
      if ((ledger?.outbound ?? 0) > 0) this.outboundWritten();
      return done;
    };
    if (call.dry) return run(cached ?? (await loadSession(this.db, call.app.applicationId, call.customerSessionId)));
    return this.idempotent(scope, () => this.withRetries(call.app, call.customerSessionId, cached, run), replayedOutcome);
  }

  /** PUT .../reopen: a closed session is open again and what its close committed is rolled back. */
  async reopen(call: ReopenSessionCall, cached: SessionRecord | undefined): Promise<SessionUpdateOutcome> {
    const now = this.clock.now();
    const scope = this.scopeOf(call.app, call.idempotencyKey, `reopenSession:${call.customerSessionId}`, {});
    return this.idempotent(scope, () =>
      this.withRetries(
        call.app,
        call.customerSessionId,
        cached,
        async (stored) => {
          if (!stored) throw notFound('Customer session', '/path/customerSessionId');
          if (stored.state !== 'closed') throw badRequest(`Only a closed session can be reopened; this one is ${stored.state}`, '/path/customerSessionId', 'InvalidSessionStateTransition');
          const snapshot = await this.snapshots.get(call.app.applicationId);
          return this.undoClose(call.app, snapshot, stored, 'open', `${this.prefix}session_updated`, new Set(['customerSession']), now, scope);
        },
      ),
      replayedOutcome,
    );
  }

  /** The session as its actor keeps it, or as stored when the actor keeps none (undefined: no such session). */
  async stored(app: AppRef, sessionId: string, cached: SessionRecord | undefined): Promise<SessionRecord | undefined> {
    return cached ?? (await loadSession(this.db, app.applicationId, sessionId));
  }

  async get(call: GetSessionCall, cached: SessionRecord | undefined): Promise<{ value: JsonObject; record: SessionRecord }> {
    const session = await this.stored(call.app, call.customerSessionId, cached);
    if (!session) throw notFound('Customer session', '/path/customerSessionId');
    return { value: { customerSession: sessionView(session), effects: session.effects }, record: session };
  }

  private async dryRun(
    app: AppRef,
    sessionId: string,
    cached: SessionRecord | undefined,
    payload: SessionPayload,
    responseContent: Set<string>,
    now: Date,
  ): Promise<JsonObject> {
    // Only the payload sent counts (spec: Dry requests); identity fields come from the stored session.
    const stored = cached ?? (await loadSession(this.db, app.applicationId, sessionId));
    const base = emptySession(app.applicationId, sessionId, now.toISOString());
    const session = await this.priced(
      await this.snapshots.get(app.applicationId),
      applyPayload({ ...base, id: stored?.id ?? 0, created: stored?.created ?? base.created }, payload),
      payload.cartItems !== undefined,
    );
    session.updateCount = stored?.updateCount ?? 0;
    const { profile, firstSession } = await loadProfileContext(this.db, app, session.profileId, !stored);
    session.firstSession = stored?.firstSession ?? firstSession;
    const mainEvent = this.mainEventType(stored, session);
    const result = await this.evaluation.run({
      applicationId: app.applicationId,
      session,
      profile,
      event: { type: mainEvent, attributes: {} },
      now,
      evaluableCampaignIds: payload.evaluableCampaignIds,
    });
    session.effects = result.effects;
    const event: EventRecord = {
      id: 0,
      created: now.toISOString(),
      applicationId: app.applicationId,
      profileId: session.profileId,
      storeIntegrationId: session.storeIntegrationId,
      type: mainEvent,
      attributes: {},
      sessionId: session.integrationId,
      effects: result.effects,
    };
    const closing = (stored?.state ?? 'open') === 'open' && session.state === 'closed';
    // What a close would create, shown but not stored.
    const created = closing ? previewCreated(result.effects) : {};
    return this.stateOf(result.snapshot, session, profile, event, result, responseContent, created, undefined, result);
  }

  /** The cart priced from the Application's catalogs; no lookup when it subscribes to none. */
  private priced(snapshot: AppSnapshot, session: SessionRecord, cartSent: boolean): Promise<SessionRecord> | SessionRecord {
    return snapshot.hasCatalogs ? priceFromCatalogs(this.db, snapshot.application.id, session, cartSent) : session;
  }

  private async updateOnce(
    app: AppRef,
    sessionId: string,
    stored: SessionRecord | undefined,
    payload: SessionPayload,
    responseContent: Set<string>,
    now: Date,
    scope: IdempotencyScope | undefined,
    requestUuid: string | undefined,
  ): Promise<SessionUpdateOutcome> {
    const nowIso = now.toISOString();
    const base = stored ?? emptySession(app.applicationId, sessionId, nowIso);
    const from = base.state;
    const to = payload.state ?? from;
    checkTransition(from, to);
    if (from !== 'open' && to === 'cancelled') {
      const snapshot = await this.snapshots.get(app.applicationId);
      return this.undoClose(app, snapshot, stored!, 'cancelled', `${this.prefix}session_cancelled`, responseContent, now, scope);
    }
    const snapshotBefore = await this.snapshots.get(app.applicationId);
    const session = await this.priced(snapshotBefore, applyPayload(base, payload), payload.cartItems !== undefined);
    const closing = from === 'open' && to === 'closed';
    // The profile is read only when something needs it: the response, a campaign whose rules read
    // it, or one that reads whether a new session is its profile's first. Otherwise a new session
    // leaves that to its commit.
    const firstNeeded = !stored && snapshotBefore.campaigns.some((c) => c.readsFirstSession);
    const profileNeeded = firstNeeded || responseContent.has('customerProfile') || snapshotBefore.campaigns.some((c) => c.readsProfile);
    const { profile, firstSession } = profileNeeded
      ? await loadProfileContext(this.db, app, session.profileId, !stored)
      : { profile: undefined, firstSession: false };
    if (!stored) session.firstSession = firstSession;
    const firstSessionUnknown = !stored && !profileNeeded;
    const mainEvent = this.mainEventType(stored, session);
    const outcome: EvaluationOutcome | undefined =
      to === 'open' || closing
        ? await this.evaluation.run({ applicationId: app.applicationId, session, profile, event: { type: mainEvent, attributes: {} }, now })
        : undefined;
    const snapshot = outcome?.snapshot ?? snapshotBefore;
    const result: EvaluationResult = outcome ?? EMPTY_RESULT;
    session.effects = result.effects;

    const eventTypes = [
      ...(stored ? [] : [`${this.prefix}session_created`]),
      `${this.prefix}session_updated`,
      ...(closing ? [`${this.prefix}session_closed`] : []),
      ...(from !== 'cancelled' && to === 'cancelled' ? [`${this.prefix}session_cancelled`] : []),
    ];
    const effectsCommit: EffectsCommit | undefined =
      closing && outcome
        ? {
            app: snapshot.application,
            campaigns: snapshot.campaigns,
            webhooks: snapshot.webhooks,
            notificationTypes: snapshot.notificationTypes,
            sessionId: session.integrationId,
            profileId: session.profileId,
            effects: result.effects,
            loaded: outcome.loaded,
            now,
            requestUuid,
          }
        : undefined;
    // A close whose effects change only campaign statistics is one statement (the session commit
    // carries them) and needs no transaction; anything counted against a limit needs one.
    const statsOnly = effectsCommit && !scope ? statisticsOnly(effectsCommit) : undefined;
    let outbound = 0;
    const write = async (t: Queryable | undefined) => {
      let extras: Extras = {};
      let ledgerEntries: LedgerWrite[] = [];
      if (effectsCommit) {
        const made = statsOnly ?? (await commitEffects(t!, effectsCommit));
        if ('outbound' in made) outbound = made.outbound;
        session.committedEffects = result.effects;
        session.committedCounters = made.counters;
        session.attributes = { ...session.attributes, ...attributeUpdates(result.effects, 'Session') };
        if ('createdCoupons' in made) {
          extras = { createdCoupons: made.createdCoupons, createdReferrals: made.createdReferrals };
          ledgerEntries = made.ledgerEntries;
        }
      }
      const commit: SessionCommit = {
        accountId: app.accountId,
        session,
        expectedUpdateCount: stored?.updateCount ?? 0,
        closing,
        knownProfile: profile,
        profileNeeded: responseContent.has('customerProfile'),
        profileDelta: closing ? { closedSessions: 1, totalSales: session.total } : undefined,
        now: nowIso,
        stats: statsOnly?.stats,
        firstSessionUnknown,
        events: eventTypes.map((type) => ({ type, attributes: {}, effects: type === mainEvent ? result.effects : [] })),
      };
      // An update (or a close) that only writes the session, its profile and statistics is one
      // statement: it needs no transaction of its own and is committed together with the other
      // sessions' updates that arrive meanwhile.
      const committed = t ? await commitSession(t, commit) : await this.sessionWrites.commit(commit);
      if (t && ledgerEntries.length > 0) committed.events = await withLedgerEntries(t, committed.events, mainEvent, ledgerEntries);
      const state = this.finalState(snapshot, committed, mainEvent, result, responseContent, extras, outcome);
      if (scope && t) await remember(t, scope, state, this.clock);
      return { state, committed: committed.session };
    };
    const done = await ((effectsCommit && !statsOnly) || scope ? this.db.transaction(write) : write(undefined));
    if (outbound > 0) this.outboundWritten();
    // Cart prices are price records of Applications that price from catalogs (best prior price
    // and strikethrough pricing are about catalog items); others record none.
    if (payload.cartItems !== undefined && snapshotBefore.hasCatalogs) await recordCartPrices(this.db, app.accountId, app.applicationId, session, nowIso);
    return done;
  }

  /** Cancel (from closed or partially returned) or reopen: every committed effect is rolled back. */
  private async undoClose(
    app: AppRef,
    snapshot: AppSnapshot,
    stored: SessionRecord,
    to: 'open' | 'cancelled',
    eventType: string,
    responseContent: Set<string>,
    now: Date,
    scope: IdempotencyScope | undefined,
  ): Promise<SessionUpdateOutcome> {
    const rollback = rollbackEffects(stored.committedEffects as Effect[]);
    const session: SessionRecord = { ...stored, state: to, effects: rollback, committedEffects: [], committedCounters: [] };
    let ledger: LedgerEntrySink | undefined;
    const write = async (t: Queryable) => {
      ledger = { entries: [], profileId: stored.profileId, accountId: app.accountId };
      await rollbackCounters(t, stored.committedCounters as CounterEntry[], { now, ledger });
      const committed = await commitSession(t, {
        accountId: app.accountId,
        session,
        expectedUpdateCount: stored.updateCount,
        closing: false,
        profileDelta: { closedSessions: -1, totalSales: -stored.total },
        now: now.toISOString(),
        events: [
          { type: `${this.prefix}session_updated`, attributes: {}, effects: eventType === `${this.prefix}session_updated` ? rollback : [] },
          ...(eventType !== `${this.prefix}session_updated` ? [{ type: eventType, attributes: {}, effects: rollback }] : []),
        ],
      });
      committed.events = await withLedgerEntries(t, committed.events, eventType, ledger.entries);
      const state = this.finalState(snapshot, committed, eventType, { ...EMPTY_RESULT, effects: rollback }, responseContent, {}, undefined);
      if (scope) await remember(t, scope, state, this.clock);
      return { state, committed: committed.session };
    };
    const done = await this.db.transaction(write);
    if ((ledger?.outbound ?? 0) > 0) this.outboundWritten();
    return done;
  }

  private finalState(
    snapshot: AppSnapshot,
    committed: SessionCommitResult,
    mainEvent: string,
    result: EvaluationResult,
    responseContent: Set<string>,
    extras: Extras,
    outcome: EvaluationOutcome | undefined,
  ): JsonObject {
    const event = committed.events.find((e) => e.type === mainEvent) ?? committed.events[committed.events.length - 1]!;
    return this.stateOf(snapshot, committed.session, committed.profile, event, result, responseContent, extras, undefined, outcome);
  }

  /**
   * Runs one attempt in a transaction, again on a stale session (re-read) or a counter that ran out
   * under it (evaluated again with fresh facts, which then reject), up to MAX_RETRIES times.
   *
   * With `assumeNew`, a session that no cache holds is first tried as a new one, without reading
   * it: a new session then costs one statement, its insert. Should it exist after all (a node that
   * just took over its shard, a cache that dropped it), the insert writes nothing and is stale, and
   * the attempt runs again on what is stored. An attempt on the guess whose input is refused (a
   * transition, say to `partially_returned`, whose message names the state it leaves) is refused
   * only once the session is known not to exist; else it runs again on what is stored.
   */
  private async withRetries(
    app: AppRef,
    sessionId: string,
    cached: SessionRecord | undefined,
    attempt: (stored: SessionRecord | undefined) => Promise<SessionUpdateOutcome>,
    options: { assumeNew?: boolean } = {},
  ): Promise<SessionUpdateOutcome> {
    let current = cached;
    const guess = options.assumeNew === true && cached === undefined;
    for (let n = 0; ; n++) {
      if ((current === undefined && !(guess && n === 0)) || n > 0) current = await loadSession(this.db, app.applicationId, sessionId);
      try {
        return await attempt(current);
      } catch (e) {
        if (!(e instanceof StaleSessionError || e instanceof CommitRaceError)) {
          // Only a refusal of the input, which comes before any write, is checked against the store.
          const refused = e instanceof AppError && e.kind === 'invalid_argument';
          if (refused && guess && n === 0 && (await loadSession(this.db, app.applicationId, sessionId)) !== undefined) continue;
          throw e;
        }
        if (n >= MAX_RETRIES) throw tooManyConcurrent('session');
        this.logger.debug('session commit raced, retrying', { session: sessionId, attempt: n, reason: e.message });
        if (e instanceof CommitRaceError) await new Promise((r) => setTimeout(r, Math.random() * 5 * (n + 1)));
      }
    }
  }

  /** The built-in event an update is evaluated for: the most specific one it emits. */
  private mainEventType(stored: SessionRecord | undefined, next: SessionRecord): string {
    const from = stored?.state ?? 'open';
    if (from === 'open' && next.state === 'closed') return `${this.prefix}session_closed`;
    if (from !== 'cancelled' && next.state === 'cancelled') return `${this.prefix}session_cancelled`;
    if (!stored) return `${this.prefix}session_created`;
    return `${this.prefix}session_updated`;
  }

  private evaluationTime(call: UpdateSessionCall): Date {
    const now = this.clock.now();
    if (call.now === undefined) return now;
    if (!call.dry) throw badRequest('`now` may only be used with dry=true', '/query/now');
    const t = new Date(call.now);
    if (Number.isNaN(t.getTime())) throw badRequest('`now` must be an RFC 3339 date-time', '/query/now');
    if (t.getTime() < now.getTime()) throw badRequest('`now` must not be in the past', '/query/now');
    return t;
  }

  /** IntegrationStateV2 of a session call: the shared shape plus the session's own keys. */
  private stateOf(
    snapshot: AppSnapshot,
    session: SessionRecord,
    profile: ProfileRecord | undefined,
    event: EventRecord | undefined,
    result: EvaluationResult,
    responseContent: Set<string>,
    extras: Extras,
    previousReturns?: unknown[],
    outcome?: EvaluationOutcome,
  ): JsonObject {
    const extra: JsonObject = {};
    if (responseContent.has('customerSession')) extra.customerSession = sessionView(session);
    if (responseContent.has('coupons')) {
      extra.coupons = outcome?.loaded.facts.coupons?.map((c) => ({ id: c.id, value: c.value, campaignId: c.campaignId, usageCounter: c.usageCounter, usageLimit: c.usageLimit, attributes: c.attributes })) ?? [];
    }
    if (responseContent.has('referral')) extra.referral = outcome?.loaded.facts.referral ? { ...outcome.loaded.facts.referral } : null;
    if (extras.returned && responseContent.has('return')) extra.return = extras.returned;
    if (previousReturns && responseContent.has('previousReturns')) extra.previousReturns = previousReturns;
    return integrationState(responseContent, {
      snapshot,
      result,
      profile,
      event,
      createdCoupons: extras.createdCoupons ?? [],
      createdReferrals: extras.createdReferrals ?? [],
      extra,
    });
  }
}

interface ReturnedLine {
  position: number;
  quantity: number;
  /** Quantity of the line before this return. */
  of: number;
  /** Price × quantity, with the line's own additional costs. */
  amount: number;
  /** Price × quantity. */
  itemAmount: number;
}

/** The lines a return names, checked against the session's cart (a 400 points at the bad entry). */
function returnedLines(cart: readonly CartItem[], items: ReadonlyArray<{ position: number; quantity?: number }>): ReturnedLine[] {
  if (items.length === 0) throw badRequest('A return needs at least one returned cart item', '/return/returnedCartItems');
  const out: ReturnedLine[] = [];
  items.forEach((r, i) => {
    const line = cart.find((c) => c.position === r.position);
    if (!line) throw badRequest(`No cart item at position ${r.position}`, `/return/returnedCartItems/${i}/position`);
    if (out.some((o) => o.position === r.position)) throw badRequest(`Position ${r.position} is returned twice`, `/return/returnedCartItems/${i}/position`);
    const quantity = r.quantity ?? line.quantity;
    if (quantity < 1 || quantity > line.quantity) {
      throw badRequest(`Quantity must be 1 to ${line.quantity} for position ${r.position}`, `/return/returnedCartItems/${i}/quantity`);
    }
    const costs = Object.values(line.additionalCosts ?? {}).map((c) => [c.price, quantity] as const);
    const itemAmount = sumProducts([[line.price, quantity]]);
    out.push({ position: r.position, quantity, of: line.quantity, itemAmount, amount: addExact(itemAmount, sumProducts(costs)) });
  });
  return out;
}

/**
 * Rollback effects of a return: a per-item discount of a returned line goes back by the returned
 * share of that line; session-wide amounts go back by the returned share of the cart. Coupon and
 * referral redemptions stay (the purchase still happened).
 */
function returnRollback(committed: readonly Effect[], returned: readonly ReturnedLine[], share: number, round: (n: number) => number): Effect[] {
  const out: Effect[] = [];
  for (const e of committed) {
    if (e.effectType === 'acceptCoupon' || e.effectType === 'acceptReferral') continue;
    const position = e.props.position;
    if (typeof position === 'number') {
      const line = returned.find((r) => r.position === position);
      if (!line) continue;
      out.push(...rollbackEffects([e], line.quantity / line.of, round));
    } else {
      out.push(...rollbackEffects([e], share, round));
    }
  }
  return out.filter((e) => typeof e.props.value !== 'number' || e.props.value !== 0);
}

/** What stays committed after rollback effects: each amount less what went back. */
function remainingAfter(committed: readonly Effect[], rollback: readonly Effect[]): Effect[] {
  const used = new Set<Effect>();
  return committed.map((e) => {
    const r = rollback.find(
      (x) => !used.has(x) && x.campaignId === e.campaignId && x.ruleIndex === e.ruleIndex && x.props.name === e.props.name && x.props.position === e.props.position && typeof e.props.value === 'number',
    );
    if (!r || typeof r.props.value !== 'number') return e;
    used.add(r);
    return { ...e, props: { ...e.props, value: addExact(e.props.value as number, -(r.props.value as number)) } };
  }).filter((e) => e.props.value !== 0);
}

function returnView(r: Record<string, unknown>): Record<string, unknown> {
  return {
    id: Number(r.id),
    created: r.created instanceof Date ? r.created.toISOString() : r.created,
    returnedCartItems: r.returned_cart_items,
    amount: Number(r.amount),
    effects: r.effects,
  };
}

export { couponView, referralView };
