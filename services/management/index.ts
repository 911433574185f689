// Management API use cases: log in and tokens, Applications, campaigns, rulesets (compile-checked
// by the engine), Integration API keys, coupons (with their asynchronous creation jobs) and
// referrals, loyalty programs and ledgers, custom attributes, webhooks and notification webhooks,
// the sessions view, access and webhook logs (with the batched access log writer), users, invites,
// password recovery and their mail outbox, and the account; with the account and role checks of
// every call. Each function takes the caller (Principal) and validated input, and returns the JSON
// to send; changes write their notifications to the outbox in their own transaction.
export * from './context.js';
export * from './auth.js';
export * from './api-keys.js';
export * from './applications.js';
export * from './campaigns.js';
export * from './rulesets.js';
export * from './attributes.js';
// ---- exports I: catalogs and pricing (issue 6; keep this marker) ----
export * from './catalogs.js';
// ---- exports J: loyalty in sessions, cards, balances and the scheduler (issue 6; keep this marker) ----
export { createLoyaltyCard, getLoyaltyCard, updateLoyaltyCard, type NewLoyaltyCardBody, type UpdateLoyaltyCardBody } from './loyalty-cards.js';
// ---- exports K: achievements (issue 6; keep this marker) ----
export * from './achievements.js';
// ---- exports A: applications, campaigns, rulesets (issue 5; keep this marker) ----
// ---- exports B: coupons and referrals (issue 5; keep this marker) ----
export * from './coupons.js';
export * from './referrals.js';
// ---- exports C: loyalty programs and ledgers (issue 5; keep this marker) ----
export * from './loyalty.js';
// ---- exports D: attributes, webhooks, sessions view (issue 5; keep this marker) ----
export * from './webhooks.js';
export * from './customer-sessions.js';
// ---- exports E: access logs and webhook logs (issue 5; keep this marker) ----
export * from './logs.js';
export * from './access-log-writer.js';
// ---- exports F: users, invites, password recovery, accounts (issue 5; keep this marker) ----
export * from './users.js';
export * from './accounts.js';
// ---- exports L: notification producers (issue 7; keep this marker) ----
export * from './notification-webhooks.js';
export { CouponJobRunner, createCouponsAsync, getCouponCreationJob, MAX_ASYNC_COUPONS, type CouponJobRunnerOptions } from './coupon-jobs.js';
