// Integration API use cases: customer sessions (and, in later issues, profiles, events, returns,
// coupons, referrals, loyalty, achievements, audiences and catalogs). Each use case loads what it
// needs, evaluates through the engine and commits everything of one call in one transaction.
export { SessionService, type Evaluator, type SessionServiceOptions, type SessionUpdateOutcome } from './sessions.js';
export { ReferralService } from './referrals.js';
export { CampaignEvaluation, type EvaluationOutcome, type EvaluationRequest } from './evaluation.js';
export { commitEffects, CommitRaceError, couponView, referralView, type CounterEntry, type EffectsCommitResult } from './commit-effects.js';
export { normalizeCode } from './facts.js';
export { SnapshotCache, candidateCampaigns, type AppSnapshot, type ApplicationSettings, type CampaignSnapshot } from './snapshot.js';
export { type SessionRecord, type CartItem, SessionState, sessionView } from './session-model.js';
export { type ProfileRecord, type EventRecord } from './repository.js';
