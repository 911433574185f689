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
    // ---- handlers A: applications, campaigns, rulesets (issue 5; keep this marker) ----
    // ---- handlers B: coupons and referrals (issue 5; keep this marker) ----
    // ---- handlers C: loyalty programs and ledgers (issue 5; keep this marker) ----
    // ---- handlers D: attributes, webhooks, sessions view (issue 5; keep this marker) ----
    // ---- handlers E: access logs and webhook logs (issue 5; keep this marker) ----
    getAccessLogs: async ({ principal, params, query }) =>
      ok(await m.listApplicationAccessLogs(ctx, who(principal), params.applicationId, query as m.AccessLogQuery)),
    getAccessLogsWithoutTotalCount: async ({ principal, params, query }) =>
      ok(await m.listApplicationAccessLogs(ctx, who(principal), params.applicationId, query as m.AccessLogQuery, false)),
    getAllAccessLogs: async ({ principal, query }) => ok(await m.listAccountAccessLogs(ctx, who(principal), query as m.AccessLogQuery)),
    getWebhookLogs: async ({ principal, query }) => ok(await m.listWebhookLogs(ctx, who(principal), query)),
    // ---- handlers F: users, invites, password recovery, accounts (issue 5; keep this marker) ----
  };
}
