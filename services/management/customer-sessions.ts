// The backoffice view of an Application's customer sessions (addendum: sessions of an
// Application): read-only, straight from Postgres. A session is shown as the Integration API v2
// shows it (services/integration/session-model.ts sessionView), plus when it closed; one session
// also shows the effects of its last evaluation and the effects its close committed.
import { notFound } from '../shared/index.js';
import { compact, iso, listPage, requireApplication, type ListQuery, type ManagementContext, type Principal } from './context.js';

export interface SessionListQuery extends ListQuery {
  profile?: string;
  state?: string;
  createdBefore?: string;
  createdAfter?: string;
  integrationId?: string;
}

// The list leaves out the effects, which can be large; the stored columns are those of
// services/integration/repository.ts.
const listColumns = `id, application_id, integration_id, created, updated, closed_at, profile_id, store_integration_id, state,
  coupon_codes, referral_code, loyalty_cards, identifiers, cart_items, additional_costs, attributes, total,
  cart_item_total, additional_cost_total, first_session, update_count`;

export function applicationSessionView(r: Record<string, unknown>): Record<string, unknown> {
  return compact({
    id: Number(r.id),
    integrationId: r.integration_id as string,
    created: iso(r.created),
    updated: iso(r.updated),
    closedAt: iso(r.closed_at),
    applicationId: r.application_id as number,
    profileId: r.profile_id as string,
    storeIntegrationId: r.store_integration_id as string,
    couponCodes: r.coupon_codes as string[],
    referralCode: r.referral_code as string,
    loyaltyCards: r.loyalty_cards as string[],
    identifiers: r.identifiers as string[],
    state: r.state as string,
    cartItems: r.cart_items as unknown[],
    additionalCosts: r.additional_costs as Record<string, unknown>,
    attributes: r.attributes as Record<string, unknown>,
    firstSession: r.first_session as boolean,
    total: Number(r.total),
    cartItemTotal: Number(r.cart_item_total),
    additionalCostTotal: Number(r.additional_cost_total),
    updateCount: r.update_count as number,
  });
}

/** GET /v1/applications/{applicationId}/sessions */
export async function listApplicationSessions(ctx: ManagementContext, principal: Principal, applicationId: number, query: SessionListQuery) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  return listPage(
    ctx.db,
    {
      select: listColumns,
      from: `FROM customer_sessions
        WHERE application_id = $1
          AND ($2::text IS NULL OR profile_id = $2)
          AND ($3::text IS NULL OR state = $3)
          AND ($4::timestamptz IS NULL OR created < $4)
          AND ($5::timestamptz IS NULL OR created > $5)
          AND ($6::text IS NULL OR (integration_id_hash = text_sha256($6) AND integration_id = $6))`,
      params: [applicationId, query.profile ?? null, query.state ?? null, query.createdBefore ?? null, query.createdAfter ?? null, query.integrationId ?? null],
      query,
      sortable: { id: 'id', created: 'created', updated: 'updated' },
      withTotal: true,
    },
    applicationSessionView,
  );
}

/** GET /v1/applications/{applicationId}/sessions/{sessionId}: another Application's session is not found. */
export async function getApplicationSession(ctx: ManagementContext, principal: Principal, applicationId: number, sessionId: number) {
  await requireApplication(ctx.db, principal, applicationId, 'read');
  const [row] = await ctx.db.query(`SELECT ${listColumns}, effects, committed_effects FROM customer_sessions WHERE id = $1 AND application_id = $2`, [
    sessionId,
    applicationId,
  ]);
  if (!row) throw notFound('Session', '/sessionId');
  return { ...applicationSessionView(row), effects: (row.effects as unknown[]) ?? [], committedEffects: (row.committed_effects as unknown[]) ?? [] };
}
