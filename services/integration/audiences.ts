// Audiences (issue 6): account-level groups of customer profiles. Created, renamed and deleted
// through the Integration API; members are added and removed in bulk (creating missing profiles),
// by `audiencesChanges` of a profile update, and by the addToAudience / removeFromAudience effects
// of rules (commit-effects.ts). Memberships are rows of audience_memberships, read with the profile
// in the same query (repository.ts AUDIENCES_OF_P), so an evaluation always sees the latest ones.
// None of these calls needs an actor's ordering: every change is a single set-based statement in
// a transaction, and rows are locked in a fixed order (profiles, then memberships, by id).
import type { AudienceCall, JsonObject } from '../actors/port.js';
import { AppError, notFound, type Clock } from '../shared/index.js';
import { isUniqueViolation, ROWS_MARK, type Db, type Queryable } from '../store/index.js';
import { remember, withIdempotency, type IdempotencyScope } from './idempotency.js';

const iso = (v: unknown): string => (v instanceof Date ? v.toISOString() : new Date(String(v)).toISOString());

/** The Audience resource (service-spec, Audience); absent optional fields are left out. */
export function audienceView(r: Record<string, unknown>): JsonObject {
  return {
    id: r.id as number,
    accountId: r.account_id as number,
    created: iso(r.created),
    name: r.name as string,
    sandbox: r.sandbox as boolean,
    ...(r.description != null ? { description: r.description as string } : {}),
    ...(r.integration != null ? { integration: r.integration as string } : {}),
    ...(r.integration_id != null ? { integrationId: r.integration_id as string } : {}),
    createdIn3rdParty: r.created_in_3rd_party as boolean,
    ...(r.last_update != null ? { lastUpdate: iso(r.last_update) } : {}),
  };
}

const integrationIdTaken = (integration: string | undefined, id: string): AppError =>
  new AppError('conflict', `An audience with integrationId ${JSON.stringify(id)} already exists${integration ? ` for ${JSON.stringify(integration)}` : ''}`, [
    { title: 'Conflict', details: 'integrationId already used for this integration in the account', source: { pointer: '/integrationId' } },
  ]);

export interface AudienceAction {
  action: 'add' | 'remove';
  profileIntegrationId: string;
  audienceId: number;
}

/** Membership actions as the JSON rows of ADD_MEMBERS_SQL and REMOVE_MEMBERS_SQL, each with ROWS_MARK. */
const membershipRows = (actions: readonly AudienceAction[]): string =>
  JSON.stringify(actions.map((a) => ({ audienceId: a.audienceId, profileIntegrationId: a.profileIntegrationId, mark: ROWS_MARK })));

/**
 * The actions of $2 (membershipRows) as rows `x`, each with its profile `p` of the account $1.
 * Each profile is looked up by its key in a subquery of its own: planned for a few rows (the mark)
 * but joined directly, the generic plan made on a new database read every profile of the account
 * and matched the ids in the join, because an account's few profiles then cost less to read than
 * one lookup per row.
 */
const ACTIONS_WITH_PROFILE = `jsonb_to_recordset($2::jsonb) AS x("audienceId" int, "profileIntegrationId" text, mark int)
     JOIN LATERAL (SELECT q.id FROM customer_profiles q WHERE q.account_id = $1 AND q.integration_id = x."profileIntegrationId" LIMIT 1) p ON true`;

/** Memberships added: $1 the account, $2 the actions (membershipRows), $3 the time, $4 ROWS_MARK. */
export const ADD_MEMBERS_SQL = `INSERT INTO audience_memberships (audience_id, profile_id, created)
   SELECT x."audienceId", p.id, $3 FROM ${ACTIONS_WITH_PROFILE}
    WHERE x.mark = $4
    ORDER BY p.id, x."audienceId"
   ON CONFLICT DO NOTHING`;

/** Memberships removed: $1 the account, $2 the actions (membershipRows), $3 ROWS_MARK. */
export const REMOVE_MEMBERS_SQL = `DELETE FROM audience_memberships WHERE (profile_id, audience_id) IN (
     SELECT m.profile_id, m.audience_id FROM ${ACTIONS_WITH_PROFILE}
       JOIN audience_memberships m ON m.profile_id = p.id AND m.audience_id = x."audienceId"
      WHERE x.mark = $3
      ORDER BY m.profile_id, m.audience_id FOR UPDATE OF m)`;

export class AudienceService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock = { now: () => new Date() },
  ) {}

  async create(call: AudienceCall): Promise<JsonObject> {
    const b = call.request as {
      name: string;
      sandbox?: boolean;
      description?: string;
      integration?: string;
      integrationId?: string;
      createdIn3rdParty?: boolean;
      lastUpdate?: string;
    };
    try {
      return await this.write(call, 'createAudience', async (tx) => {
        const [row] = await tx.query(
          `INSERT INTO audiences (account_id, name, description, integration, integration_id, sandbox, created_in_3rd_party, last_update, created)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *`,
          [
            call.app.accountId,
            b.name,
            b.description ?? null,
            b.integration ?? null,
            b.integrationId ?? null,
            b.sandbox ?? false,
            b.createdIn3rdParty ?? false,
            b.lastUpdate ?? null,
            this.clock.now().toISOString(),
          ],
        );
        return audienceView(row!);
      });
    } catch (e) {
      if (isUniqueViolation(e)) throw integrationIdTaken(b.integration, b.integrationId ?? '');
      throw e;
    }
  }

  /** Renames the audience; no rule runs. */
  async rename(call: AudienceCall): Promise<JsonObject> {
    return this.write(call, 'updateAudience', async (tx) => {
      const [row] = await tx.query(`UPDATE audiences SET name = $3 WHERE id = $1 AND account_id = $2 RETURNING *`, [
        call.audienceId,
        call.app.accountId,
        (call.request as { name: string }).name,
      ]);
      if (!row) throw notFound('Audience', '/path/audienceId');
      return audienceView(row);
    });
  }

  /** Deletes the audience; its memberships go with it (ON DELETE CASCADE). */
  async delete(call: AudienceCall): Promise<void> {
    await this.write(call, 'deleteAudience', async (tx) => {
      const rows = await tx.query(`DELETE FROM audiences WHERE id = $1 AND account_id = $2 RETURNING id`, [call.audienceId, call.app.accountId]);
      if (rows.length === 0) throw notFound('Audience', '/path/audienceId');
      return {};
    });
  }

  /** Removes every member of the audience. */
  async removeAllMembers(call: AudienceCall): Promise<void> {
    await this.write(call, 'deleteAudienceMemberships', async (tx) => {
      await this.requireAudience(tx, call);
      await tx.query(
        `DELETE FROM audience_memberships WHERE audience_id = $1 AND profile_id IN (
           SELECT profile_id FROM audience_memberships WHERE audience_id = $1 ORDER BY profile_id FOR UPDATE)`,
        [call.audienceId],
      );
      return {};
    });
  }

  /** Merges the attributes into every member profile (no rule runs). */
  async updateMembersAttributes(call: AudienceCall): Promise<void> {
    const attributes = call.request;
    await this.write(call, 'updateAudienceMembersAttributes', async (tx) => {
      await this.requireAudience(tx, call);
      if (Object.keys(attributes).length === 0) return {};
      await tx.query(
        `UPDATE customer_profiles p SET attributes = p.attributes || $2::jsonb
          WHERE p.id IN (SELECT q.id FROM customer_profiles q JOIN audience_memberships m ON m.profile_id = q.id
                          WHERE m.audience_id = $1 ORDER BY q.id FOR NO KEY UPDATE OF q)`,
        [call.audienceId, JSON.stringify(attributes)],
      );
      return {};
    });
  }

  /**
   * Applies up to 1000 add/remove actions in one transaction (all or nothing). For one audience
   * and profile the last action counts, as if they were applied in order. `add` creates missing
   * profiles.
   */
  async changeMembers(call: AudienceCall): Promise<void> {
    const actions = (call.request as { data: AudienceAction[] }).data;
    const audienceIds = [...new Set(actions.map((a) => a.audienceId))];
    const final = new Map<string, AudienceAction>();
    for (const a of actions) final.set(JSON.stringify([a.audienceId, a.profileIntegrationId]), a);
    const adds = [...final.values()].filter((a) => a.action === 'add');
    const removes = [...final.values()].filter((a) => a.action === 'remove');
    const now = this.clock.now().toISOString();
    await this.write(call, 'updateAudienceMembers', async (tx) => {
      const found = await tx.query<{ id: number }>(`SELECT id FROM audiences WHERE account_id = $1 AND id = ANY($2::int[])`, [call.app.accountId, audienceIds]);
      const known = new Set(found.map((r) => r.id));
      const missing = actions.findIndex((a) => !known.has(a.audienceId));
      if (missing >= 0) throw notFound('Audience', `/data/${missing}/audienceId`);
      const addProfiles = [...new Set(adds.map((a) => a.profileIntegrationId))].sort();
      if (addProfiles.length > 0) {
        await tx.query(
          `INSERT INTO customer_profiles (account_id, integration_id, created, last_activity)
           SELECT $1, x, $3, $3 FROM unnest($2::text[]) AS x ORDER BY x
           ON CONFLICT (account_id, integration_id) DO NOTHING`,
          [call.app.accountId, addProfiles, now],
        );
        await tx.query(ADD_MEMBERS_SQL, [call.app.accountId, membershipRows(adds), now, ROWS_MARK]);
      }
      if (removes.length > 0) {
        await tx.query(REMOVE_MEMBERS_SQL, [call.app.accountId, membershipRows(removes), ROWS_MARK]);
      }
      return {};
    });
  }

  private async requireAudience(tx: Queryable, call: AudienceCall): Promise<void> {
    const rows = await tx.query(`SELECT 1 FROM audiences WHERE id = $1 AND account_id = $2`, [call.audienceId, call.app.accountId]);
    if (rows.length === 0) throw notFound('Audience', '/path/audienceId');
  }

  /**
   * Runs a write in a transaction (which the store runs again after a deadlock), under its
   * Idempotency-Key when one was sent: a stored response is replayed, and the response is stored
   * with the write.
   */
  private async write(call: AudienceCall, operation: string, fn: (tx: Queryable) => Promise<JsonObject>): Promise<JsonObject> {
    const scope: IdempotencyScope | undefined =
      call.idempotencyKey === undefined
        ? undefined
        : { applicationId: call.app.applicationId, key: call.idempotencyKey, operation: `${operation}:${call.audienceId ?? ''}`, request: call.request };
    const run = () =>
      this.db.transaction(async (tx) => {
        const out = await fn(tx);
        if (scope) await remember(tx, scope, out, this.clock);
        return out;
      });
    return withIdempotency(this.db, this.clock, scope, run, (stored) => stored);
  }
}

/**
 * `audiencesChanges` of a profile update: adds and deletes memberships of the profile (which
 * exists by then) in the caller's transaction. Unknown audiences of the account are a 404.
 */
export async function applyAudiencesChanges(
  tx: Queryable,
  accountId: number,
  profileIntegrationId: string,
  changes: { adds?: number[]; deletes?: number[] } | undefined,
): Promise<void> {
  const adds = [...new Set(changes?.adds ?? [])];
  const deletes = [...new Set(changes?.deletes ?? [])];
  if (adds.length + deletes.length === 0) return;
  // An id outside the column's range names no audience (and must not reach the int[] cast).
  const storable = [...adds, ...deletes].filter((id) => Number.isSafeInteger(id) && id > 0 && id <= 2_147_483_647);
  const found = await tx.query<{ id: number }>(`SELECT id FROM audiences WHERE account_id = $1 AND id = ANY($2::int[])`, [accountId, storable]);
  const known = new Set(found.map((r) => r.id));
  const badAdd = (changes?.adds ?? []).findIndex((id) => !known.has(id));
  if (badAdd >= 0) throw notFound('Audience', `/audiencesChanges/adds/${badAdd}`);
  const badDelete = (changes?.deletes ?? []).findIndex((id) => !known.has(id));
  if (badDelete >= 0) throw notFound('Audience', `/audiencesChanges/deletes/${badDelete}`);
  await tx.query(
    `WITH p AS (SELECT id FROM customer_profiles WHERE account_id = $1 AND integration_id = $2),
     d AS (DELETE FROM audience_memberships m USING p WHERE m.profile_id = p.id AND m.audience_id = ANY($4::int[]))
     INSERT INTO audience_memberships (audience_id, profile_id, created)
     SELECT a, p.id, now() FROM p, unnest($3::int[]) AS a ORDER BY a
     ON CONFLICT DO NOTHING`,
    [accountId, profileIntegrationId, adds, deletes],
  );
}
