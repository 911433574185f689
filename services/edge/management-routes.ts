import * as m from '../management/index.js';
import type { Principal } from '../management/index.js';
import type { RouteHandler } from './app.js';

const ok = (body: unknown) => ({ status: 200, body });
const created = (body: unknown) => ({ status: 201, body });
const noContent = () => ({ status: 204 });

/** Management API handlers by operationId. */
export function managementHandlers(ctx: m.ManagementContext): Record<string, RouteHandler> {
  const who = (p: Principal | undefined): Principal => p!;
  return {
    createSession: async ({ body }) => created(await m.login(ctx, body.email, body.password)),
    destroySession: async ({ bearerToken }) => {
      await m.logout(ctx, bearerToken!);
      return noContent();
    },
    createApplication: async ({ principal, body }) => created(await m.createApplication(ctx, who(principal), body)),
    getApplications: async ({ principal, query }) => ok(await m.listApplications(ctx, who(principal), query)),
    getApplication: async ({ principal, params }) => ok(await m.getApplication(ctx, who(principal), params.applicationId)),
    updateApplication: async ({ principal, params, body }) => ok(await m.updateApplication(ctx, who(principal), params.applicationId, body)),
    deleteApplication: async ({ principal, params }) => {
      await m.deleteApplication(ctx, who(principal), params.applicationId);
      return noContent();
    },
    createApiKey: async ({ principal, params, body }) => created(await m.createApiKey(ctx, who(principal), params.applicationId, body)),
    getApiKeys: async ({ principal, params, query }) => ok(await m.listApiKeys(ctx, who(principal), params.applicationId, query)),
    deleteApiKey: async ({ principal, params }) => {
      await m.deleteApiKey(ctx, who(principal), params.applicationId, params.keyId);
      return noContent();
    },
    createCampaign: async ({ principal, params, body }) => created(await m.createCampaign(ctx, who(principal), params.applicationId, body)),
    getCampaigns: async ({ principal, params, query }) => ok(await m.listCampaigns(ctx, who(principal), params.applicationId, query)),
    getCampaign: async ({ principal, params }) => ok(await m.getCampaign(ctx, who(principal), params.applicationId, params.campaignId)),
    updateCampaign: async ({ principal, params, body }) =>
      ok(await m.updateCampaign(ctx, who(principal), params.applicationId, params.campaignId, body)),
    deleteCampaign: async ({ principal, params }) => {
      await m.deleteCampaign(ctx, who(principal), params.applicationId, params.campaignId);
      return noContent();
    },
    createRuleset: async ({ principal, params, body }) =>
      created(await m.createRuleset(ctx, who(principal), params.applicationId, params.campaignId, body)),
    getRulesets: async ({ principal, params, query }) =>
      ok(await m.listRulesets(ctx, who(principal), params.applicationId, params.campaignId, query)),
    getRuleset: async ({ principal, params }) =>
      ok(await m.getRuleset(ctx, who(principal), params.applicationId, params.campaignId, params.rulesetId)),
    createAttribute: async ({ principal, body }) => created(await m.createAttribute(ctx, who(principal), body)),
    getAttributes: async ({ principal, query }) => ok(await m.listAttributes(ctx, who(principal), query)),
    // ---- handlers I: catalogs and pricing (issue 6; keep this marker) ----
    createCatalog: async ({ principal, body }) => created(await m.createCatalog(ctx, who(principal), body)),
    getCatalogs: async ({ principal, query }) => ok(await m.listCatalogs(ctx, who(principal), query)),
    getCatalog: async ({ principal, params }) => ok(await m.getCatalog(ctx, who(principal), params.catalogId)),
    updateCatalog: async ({ principal, params, body }) => ok(await m.updateCatalog(ctx, who(principal), params.catalogId, body)),
    deleteCatalog: async ({ principal, params }) => {
      await m.deleteCatalog(ctx, who(principal), params.catalogId);
      return noContent();
    },
    getPriceHistory: async ({ principal, params, body }) => ok(await m.priceHistory(ctx, who(principal), params.applicationId, body)),
    // ---- handlers J: loyalty in sessions, cards, balances and the scheduler (issue 6; keep this marker) ----
    createLoyaltyCard: async ({ principal, params, body }) => created(await m.createLoyaltyCard(ctx, who(principal), params.programID, body)),
    getLoyaltyCard: async ({ principal, params }) => ok(await m.getLoyaltyCard(ctx, who(principal), params.programID, params.cardId)),
    updateLoyaltyCard: async ({ principal, params, body }) => ok(await m.updateLoyaltyCard(ctx, who(principal), params.programID, params.cardId, body)),
    // ---- handlers K: achievements (issue 6; keep this marker) ----
    createAchievement: async ({ principal, params, body }) =>
      created(await m.createAchievement(ctx, who(principal), params.applicationId, params.campaignId, body)),
    getAchievements: async ({ principal, params, query }) =>
      ok(await m.listAchievements(ctx, who(principal), params.applicationId, params.campaignId, query)),
    getAchievement: async ({ principal, params }) =>
      ok(await m.getAchievement(ctx, who(principal), params.applicationId, params.campaignId, params.achievementId)),
    updateAchievement: async ({ principal, params, body }) =>
      ok(await m.updateAchievement(ctx, who(principal), params.applicationId, params.campaignId, params.achievementId, body)),
    deleteAchievement: async ({ principal, params }) => {
      await m.deleteAchievement(ctx, who(principal), params.applicationId, params.campaignId, params.achievementId);
      return noContent();
    },
    // ---- handlers A: applications, campaigns, rulesets (issue 5; keep this marker) ----
    searchCampaigns: async ({ principal, params, query, body }) =>
      ok(await m.searchCampaigns(ctx, who(principal), params.applicationId, query, body)),
    copyCampaignToApplications: async ({ principal, params, body }) =>
      created(await m.copyCampaignToApplications(ctx, who(principal), params.applicationId, params.campaignId, body)),
    updateRuleset: async ({ principal, params, body }) =>
      ok(await m.updateRuleset(ctx, who(principal), params.applicationId, params.campaignId, params.rulesetId, body)),
    deleteRuleset: async ({ principal, params }) => {
      await m.deleteRuleset(ctx, who(principal), params.applicationId, params.campaignId, params.rulesetId);
      return noContent();
    },
    // ---- handlers B: coupons and referrals (issue 5; keep this marker) ----
    createCoupons: async ({ principal, params, query, body }) => {
      const out = await m.createCoupons(ctx, who(principal), params.applicationId, params.campaignId, body, query.silent === 'yes');
      return out ? ok(out) : noContent();
    },
    updateCouponBatch: async ({ principal, params, body }) => ok(await m.updateCouponBatch(ctx, who(principal), params.applicationId, params.campaignId, body)),
    getCoupons: async ({ principal, params, query }) => ok(await m.listCoupons(ctx, who(principal), params.applicationId, params.campaignId, query)),
    getCouponsWithoutTotalCount: async ({ principal, params, query }) =>
      ok(await m.listCouponsWithoutTotal(ctx, who(principal), params.applicationId, params.campaignId, query)),
    deleteCoupons: async ({ principal, params, query }) => {
      await m.deleteCoupons(ctx, who(principal), params.applicationId, params.campaignId, query);
      return noContent();
    },
    getReferrals: async ({ principal, params, query }) => ok(await m.listReferrals(ctx, who(principal), params.applicationId, params.campaignId, query)),
    getReferralsWithoutTotalCount: async ({ principal, params, query }) =>
      ok(await m.listReferralsWithoutTotal(ctx, who(principal), params.applicationId, params.campaignId, query)),
    deleteReferral: async ({ principal, params }) => {
      await m.deleteReferral(ctx, who(principal), params.applicationId, params.campaignId, params.referralId);
      return noContent();
    },
    // ---- handlers C: loyalty programs and ledgers (issue 5; keep this marker) ----
    getLoyaltyPrograms: async ({ principal, query }) => ok(await m.listLoyaltyPrograms(ctx, who(principal), query)),
    createLoyaltyProgram: async ({ principal, body }) => created(await m.createLoyaltyProgram(ctx, who(principal), body)),
    getLoyaltyProgram: async ({ principal, params }) => ok(await m.getLoyaltyProgram(ctx, who(principal), params.programID)),
    updateLoyaltyProgram: async ({ principal, params, body }) => ok(await m.updateLoyaltyProgram(ctx, who(principal), params.programID, body)),
    getLoyaltyPoints: async ({ principal, params }) => ok(await m.getLoyaltyPoints(ctx, who(principal), params.programID, params.integrationID)),
    addLoyaltyPoints: async ({ principal, params, body }) => {
      await m.addLoyaltyPoints(ctx, who(principal), params.programID, params.integrationID, body);
      return { status: 200 };
    },
    removeLoyaltyPoints: async ({ principal, params, body }) => {
      await m.deductLoyaltyPoints(ctx, who(principal), params.programID, params.integrationID, body);
      return { status: 200 };
    },
    // ---- handlers D: attributes, webhooks, sessions view (issue 5; keep this marker) ----
    getAttribute: async ({ principal, params }) => ok(await m.getAttribute(ctx, who(principal), params.attributeId)),
    updateAttribute: async ({ principal, params, body }) => ok(await m.updateAttribute(ctx, who(principal), params.attributeId, body)),
    deleteAttribute: async ({ principal, params }) => {
      await m.deleteAttribute(ctx, who(principal), params.attributeId);
      return noContent();
    },
    createWebhook: async ({ principal, body }) => created(await m.createWebhook(ctx, who(principal), body)),
    getWebhooks: async ({ principal, query }) => ok(await m.listWebhooks(ctx, who(principal), query)),
    getWebhook: async ({ principal, params }) => ok(await m.getWebhook(ctx, who(principal), params.webhookId)),
    updateWebhook: async ({ principal, params, body }) => ok(await m.updateWebhook(ctx, who(principal), params.webhookId, body)),
    deleteWebhook: async ({ principal, params }) => {
      await m.deleteWebhook(ctx, who(principal), params.webhookId);
      return noContent();
    },
    getApplicationSessions: async ({ principal, params, query }) =>
      ok(await m.listApplicationSessions(ctx, who(principal), params.applicationId, query)),
    getApplicationSession: async ({ principal, params }) =>
      ok(await m.getApplicationSession(ctx, who(principal), params.applicationId, params.sessionId)),
    // ---- handlers L: notification producers (issue 7; keep this marker) ----
    updateCoupon: async ({ principal, params, body }) =>
      ok(await m.updateCoupon(ctx, who(principal), params.applicationId, params.campaignId, params.couponId, body)),
    deleteCoupon: async ({ principal, params }) => {
      await m.deleteCoupon(ctx, who(principal), params.applicationId, params.campaignId, params.couponId);
      return noContent();
    },
    createCouponsAsync: async ({ principal, params, body }) => ({
      status: 202,
      body: await m.createCouponsAsync(ctx, who(principal), params.applicationId, params.campaignId, body),
    }),
    getCouponCreationJob: async ({ principal, params }) =>
      ok(await m.getCouponCreationJob(ctx, who(principal), params.applicationId, params.campaignId, params.batchId)),
    createNotificationWebhook: async ({ principal, params, body }) => created(await m.createNotificationWebhook(ctx, who(principal), params.applicationId, body)),
    getNotificationWebhooks: async ({ principal, params, query }) => ok(await m.listNotificationWebhooks(ctx, who(principal), params.applicationId, query)),
    getNotificationWebhook: async ({ principal, params }) =>
      ok(await m.getNotificationWebhook(ctx, who(principal), params.applicationId, params.notificationWebhookId)),
    updateNotificationWebhook: async ({ principal, params, body }) =>
      ok(await m.updateNotificationWebhook(ctx, who(principal), params.applicationId, params.notificationWebhookId, body)),
    deleteNotificationWebhook: async ({ principal, params }) => {
      await m.deleteNotificationWebhook(ctx, who(principal), params.applicationId, params.notificationWebhookId);
      return noContent();
    },
    // ---- handlers E: access logs and webhook logs (issue 5; keep this marker) ----
    getAccessLogs: async ({ principal, params, query }) =>
      ok(await m.listApplicationAccessLogs(ctx, who(principal), params.applicationId, query as m.AccessLogQuery)),
    getAccessLogsWithoutTotalCount: async ({ principal, params, query }) =>
      ok(await m.listApplicationAccessLogs(ctx, who(principal), params.applicationId, query as m.AccessLogQuery, false)),
    getAllAccessLogs: async ({ principal, query }) => ok(await m.listAccountAccessLogs(ctx, who(principal), query as m.AccessLogQuery)),
    getWebhookLogs: async ({ principal, query }) => ok(await m.listWebhookLogs(ctx, who(principal), query)),
    // ---- handlers F: users, invites, password recovery, accounts (issue 5; keep this marker) ----
    getUsers: async ({ principal, query }) => ok(await m.listUsers(ctx, who(principal), query)),
    getUser: async ({ principal, params }) => ok(await m.getUser(ctx, who(principal), params.userId)),
    updateUser: async ({ principal, params, body, bearerToken }) => ok(await m.updateUser(ctx, who(principal), params.userId, body, bearerToken)),
    createInvite: async ({ principal, body }) => created(await m.createInvite(ctx, who(principal), body)),
    resendInvite: async ({ principal, body }) => created(await m.resendInvite(ctx, who(principal), body)),
    acceptInvite: async ({ body }) => created(await m.acceptInvite(ctx, body)),
    createPasswordRecoveryEmail: async ({ body }) => {
      await m.requestPasswordRecovery(ctx, body);
      return noContent();
    },
    resetPassword: async ({ body }) => {
      await m.resetPassword(ctx, body);
      return noContent();
    },
    getAccount: async ({ principal, params }) => ok(await m.getAccount(ctx, who(principal), params.accountId)),
    updateAccount: async ({ principal, params, body }) => ok(await m.updateAccount(ctx, who(principal), params.accountId, body)),
  };
}
