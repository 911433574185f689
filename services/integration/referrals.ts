// Referral codes made for advocates through the Integration API (POST /v1/referrals and
// /v1/referrals_for_multiple_advocates); their redemption is part of the session flow.
import type { CreateReferralCall, JsonObject } from '../actors/port.js';
import { badRequest, notFound, systemClock, type Clock } from '../shared/index.js';
import type { Db } from '../store/index.js';
import { noFreeCode, randomCode, referralView } from './commit-effects.js';

export interface ReferralRequest {
  campaignId: number;
  advocateProfileIntegrationId: string;
  friendProfileIntegrationId?: string;
  startDate?: string;
  expiryDate?: string;
  usageLimit?: number;
  attributes?: Record<string, unknown>;
}

export class ReferralService {
  private readonly clock: Clock;

  constructor(
    private readonly db: Db,
    clock?: Clock,
  ) {
    this.clock = clock ?? systemClock;
  }

  /** Creates one referral for the call's advocate (runs in the advocate's actor). */
  async create(call: CreateReferralCall): Promise<JsonObject> {
    const body = call.request as unknown as ReferralRequest;
    if (body.friendProfileIntegrationId && body.friendProfileIntegrationId === call.advocateProfileIntegrationId) {
      throw badRequest('The friend cannot be the advocate', '/friendProfileIntegrationId', 'ReferralRecipientIdSameAsAdvocate');
    }
    if (body.startDate && body.expiryDate && new Date(body.expiryDate) <= new Date(body.startDate)) {
      throw badRequest('`expiryDate` must be after `startDate`', '/expiryDate');
    }
    const [campaign] = await this.db.query<{ id: number; state: string; referral_settings: { couponPattern?: string; validCharacters?: string[] } | null }>(
      `SELECT id, state, referral_settings FROM campaigns WHERE id = $1 AND application_id = $2`,
      [body.campaignId, call.app.applicationId],
    );
    if (!campaign) throw notFound('Campaign', '/campaignId');
    if (campaign.state === 'archived') throw badRequest('The campaign is archived', '/campaignId', 'CampaignArchived');
    const now = this.clock.now().toISOString();
    return this.db.transaction(async (tx) => {
      // The advocate is a customer from now on.
      await tx.query(
        `INSERT INTO customer_profiles (account_id, integration_id, created, last_activity) VALUES ($1, $2, $3, $3)
         ON CONFLICT (account_id, integration_id) DO NOTHING`,
        [call.app.accountId, call.advocateProfileIntegrationId, now],
      );
      for (let attempt = 0; attempt < 10; attempt++) {
        const code = randomCode(campaign.referral_settings?.couponPattern, campaign.referral_settings?.validCharacters);
        const [row] = await tx.query(
          `INSERT INTO referrals (application_id, campaign_id, code, advocate_profile_integration_id, friend_profile_integration_id,
             start_date, expiry_date, usage_limit, attributes, created)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10)
           ON CONFLICT (application_id, code) DO NOTHING RETURNING *`,
          [
            call.app.applicationId,
            campaign.id,
            code,
            call.advocateProfileIntegrationId,
            body.friendProfileIntegrationId ?? '',
            body.startDate ?? null,
            body.expiryDate ?? null,
            body.usageLimit ?? 0,
            JSON.stringify(body.attributes ?? {}),
            now,
          ],
        );
        if (row) return referralView(row);
      }
      throw noFreeCode('referral');
    });
  }
}
