// Integration API use cases: customer sessions (returns, reopen, coupons, referrals), profiles,
// custom events and legacy v1 (and, in later issues, loyalty, achievements, audiences and
// catalogs). Each use case loads what it
// needs, evaluates through the engine and commits everything of one call in one transaction.
export { SessionService, type Evaluator, type SessionServiceOptions, type SessionUpdateOutcome } from './sessions.js';
export { ReferralService } from './referrals.js';
export { ProfileService, type ProfileServiceOptions, type ProfileRequest } from './profiles.js';
export { EventService, implicitEventSessionId, type EventServiceOptions, type EventRequest } from './events.js';
export { toV1State, v1EventView, v1ProfileView, v1SessionView, V1_RESPONSE_CONTENT } from './legacy-v1.js';
export { CampaignEvaluation, type EvaluationOutcome, type EvaluationRequest } from './evaluation.js';
export { commitEffects, CommitRaceError, couponView, referralView, type CounterEntry, type EffectsCommitResult } from './commit-effects.js';
export { normalizeCode } from './facts.js';
export { SnapshotCache, candidateCampaigns, type AppSnapshot, type ApplicationSettings, type CampaignSnapshot } from './snapshot.js';
export { type SessionRecord, type CartItem, SessionState, sessionView } from './session-model.js';
export { type ProfileRecord, type EventRecord } from './repository.js';
// ---- exports G: coupon reservations and customer inventory (issue 6; keep this marker) ----
export { ReservationService, MAX_RESERVATION_IDS } from './reservations.js';
// ---- exports I: catalogs and pricing (issue 6; keep this marker) ----
export { CatalogService, filtersSql, priceFromCatalogs, priceRecordJson } from './catalogs.js';
// ---- exports J: loyalty in sessions, cards, balances and the scheduler (issue 6; keep this marker) ----
export { balancesOf, ledgerObject, LoyaltyService, settleDueLedgers, type Balances, type LoyaltyStateRequest, type SettleOptions } from './loyalty.js';
// ---- exports K: achievements (issue 6; keep this marker) ----
export { AchievementService } from './achievements.js';
// ---- exports H: audiences (issue 6; keep this marker) ----
export { AudienceService, audienceView, applyAudiencesChanges } from './audiences.js';
export { StrikethroughJobRunner, STRIKETHROUGH_BATCH_SIZE, type StrikethroughJobRunnerOptions } from './strikethrough.js';
