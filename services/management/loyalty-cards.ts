// Loyalty cards (ext) of card-based programs (issue 6, area J): create a card with the profiles
// that share it (at most usersPerCardLimit), read it, block and unblock it. The card is named in
// paths by its identifier, unique in its program.
import { AppError, badRequest, notFound } from '../shared/index.js';
import { isUniqueViolation, ledgerObjectsOf, type Queryable, type Tier } from '../store/index.js';
import { compact, iso, type ManagementContext, type Principal } from './context.js';
import { findProgram, requireLedgerReader, requireLedgerWriter } from './loyalty.js';

export interface NewLoyaltyCardBody {
  identifier: string;
  profiles?: string[];
}

export interface UpdateLoyaltyCardBody {
  status: 'active' | 'inactive';
  blockReason?: string;
}

/** The card with its profiles, and its own ledger and subledgers as of `now` (the spec's `cards` item). */
async function cardView(db: Queryable, program: Record<string, unknown>, card: Record<string, unknown>, now: Date): Promise<Record<string, unknown>> {
  const profiles = await db.query<{ integration_id: string; created: Date | string }>(
    `SELECT p.integration_id, cp.created FROM loyalty_card_profiles cp JOIN customer_profiles p ON p.id = cp.profile_id
      WHERE cp.card_id = $1 ORDER BY cp.created, p.integration_id`,
    [card.id],
  );
  return compact({
    id: card.id as number,
    created: iso(card.created),
    modified: iso(card.modified),
    programID: program.id as number,
    programName: program.name as string,
    programTitle: program.title as string,
    status: card.status as string,
    blockReason: (card.block_reason as string) || undefined,
    identifier: card.identifier as string,
    usersPerCardLimit: (program.users_per_card_limit as number | null) ?? undefined,
    profiles: profiles.map((p) => ({ integrationId: p.integration_id, timestamp: iso(p.created)! })),
    ...(await ledgerObjectsOf(db, program.id as number, { cardId: Number(card.id) }, (program.tiers as Tier[] | null) ?? [], now)),
  });
}

/** POST /v1/loyalty_programs/{programID}/cards: only in a card-based program; a taken identifier is a 409. */
export async function createLoyaltyCard(ctx: ManagementContext, principal: Principal, programId: number, body: NewLoyaltyCardBody) {
  const program = await findProgram(ctx.db, principal, programId);
  requireLedgerWriter(principal, program);
  if (!program.card_based) throw badRequest('This loyalty program is not card-based', '/programID');
  const ids = [...new Set(body.profiles ?? [])];
  const limit = program.users_per_card_limit as number | null;
  if (limit !== null && ids.length > limit) throw badRequest(`A card of this program is shared by at most ${limit} profiles`, '/profiles');
  const now = ctx.clock.now().toISOString();
  try {
    const card = await ctx.db.transaction(async (tx) => {
      const [row] = await tx.query(
        `INSERT INTO loyalty_cards (program_id, identifier, created, modified) VALUES ($1, $2, $3, $3)
         ON CONFLICT (program_id, identifier) DO NOTHING RETURNING *`,
        [programId, body.identifier, now],
      );
      if (!row) throw taken(body.identifier);
      for (const integrationId of ids) {
        await tx.query(
          `WITH p AS (
             INSERT INTO customer_profiles (account_id, integration_id, created, last_activity) VALUES ($1, $2, $3, $3)
             ON CONFLICT (account_id, integration_id) DO UPDATE SET last_activity = customer_profiles.last_activity RETURNING id
           )
           INSERT INTO loyalty_card_profiles (card_id, profile_id, created) SELECT $4, id, $3 FROM p ON CONFLICT DO NOTHING`,
          [principal.accountId, integrationId, now, row.id],
        );
      }
      return row;
    });
    return cardView(ctx.db, program, card, ctx.clock.now());
  } catch (e) {
    throw isUniqueViolation(e) ? taken(body.identifier) : e;
  }
}

const taken = (identifier: string): AppError =>
  new AppError('conflict', `A card ${JSON.stringify(identifier)} already exists in this program`, [
    { title: 'Conflict', details: `loyalty card ${identifier} already exists`, source: { pointer: '/identifier' } },
  ]);

async function findCard(db: Queryable, programId: number, identifier: string): Promise<Record<string, unknown>> {
  const [row] = await db.query(`SELECT * FROM loyalty_cards WHERE program_id = $1 AND identifier = $2`, [programId, identifier]);
  if (!row) throw notFound('Loyalty card', '/cardId');
  return row;
}

/** GET /v1/loyalty_programs/{programID}/cards/{cardId}. */
export async function getLoyaltyCard(ctx: ManagementContext, principal: Principal, programId: number, cardId: string) {
  const program = await findProgram(ctx.db, principal, programId);
  requireLedgerReader(principal, program);
  return cardView(ctx.db, program, await findCard(ctx.db, programId, cardId), ctx.clock.now());
}

/** PUT /v1/loyalty_programs/{programID}/cards/{cardId}: block (status inactive, with a reason) or unblock (active). */
export async function updateLoyaltyCard(ctx: ManagementContext, principal: Principal, programId: number, cardId: string, body: UpdateLoyaltyCardBody) {
  const program = await findProgram(ctx.db, principal, programId);
  requireLedgerWriter(principal, program);
  if (body.status === 'active' && body.blockReason !== undefined && body.blockReason !== '') {
    throw badRequest('blockReason is only for a blocked (inactive) card', '/blockReason');
  }
  const [row] = await ctx.db.query(
    `UPDATE loyalty_cards SET status = $3, block_reason = $4, modified = $5 WHERE program_id = $1 AND identifier = $2 RETURNING *`,
    [programId, cardId, body.status, body.status === 'inactive' ? (body.blockReason ?? '') : '', ctx.clock.now().toISOString()],
  );
  if (!row) throw notFound('Loyalty card', '/cardId');
  return cardView(ctx.db, program, row, ctx.clock.now());
}
