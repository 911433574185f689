// Builders shared by the loyalty tests: a program subscribed by an Application, an Integration key
// that outlives a clock moved by months, and a ruleset that never fires.
import { createIntegrationClient, unwrap, type ManagementClient } from '../../sdk/index.js';
import type { ShopSetup, TestNode } from './node.js';
import { rule } from './promotions.js';

const DAY = 86_400_000;

/** A ruleset whose only rule never fires: loyalty tests add their own campaigns. */
export const noopRuleset = { rules: [rule(false, [['noop']])], bindings: [], activate: true };

/** A loyalty program subscribed by the Application (a random internal name), as created. */
export async function createProgram(admin: ManagementClient, applicationId: number, body: Record<string, unknown> = {}) {
  return unwrap(
    await admin.POST('/v1/loyalty_programs', {
      body: { name: `p${Math.random().toString(36).slice(2, 10)}`, title: 'Points', subscribedApplications: [applicationId], ...body } as never,
    }),
  );
}

/** The shop's Integration client with a key valid for two years (tests move the clock by days and months). */
export async function longKey(t: TestNode, shop: ShopSetup): Promise<ShopSetup> {
  const key = unwrap(
    await t.admin.POST('/v1/applications/{applicationId}/api_keys', {
      params: { path: { applicationId: shop.applicationId } },
      body: { title: 'long', expires: new Date(Date.now() + 800 * DAY).toISOString() },
    }),
  );
  return { ...shop, integration: createIntegrationClient({ baseUrl: t.url, apiKey: key.key, retries: 0 }) };
}
