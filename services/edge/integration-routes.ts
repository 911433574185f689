import type { AppRef, IntegrationPort } from '../actors/port.js';
import type { RouteHandler } from './app.js';

const served = (node: string) => ({ 'X-Perkline-Node': node });

/** Integration API v2 handlers: thin calls into the IntegrationPort (the cluster router). */
export function integrationHandlers(port: IntegrationPort): Record<string, RouteHandler> {
  return {
    updateCustomerSessionV2: async ({ app, params, query, body }) => {
      const r = await port.invoke('updateSession', {
        app: app as AppRef,
        customerSessionId: params.customerSessionId,
        request: body ?? {},
        dry: query.dry === true,
        now: query.now,
      });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
    getCustomerSession: async ({ app, params }) => {
      const r = await port.invoke('getSession', { app: app as AppRef, customerSessionId: params.customerSessionId });
      return { status: 200, body: r.value, headers: served(r.servedBy) };
    },
  };
}
