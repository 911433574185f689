// Users of an account (service-spec "User and account", addendum "Roles"): admins list, read and
// update every user of their account and invite new ones; other users read and update only
// themselves (another user is "not found", as another account's user is). Invites and password
// recovery use single-use random tokens stored as SHA-256, and queue their mail in the same
// transaction as the change. A password hash never leaves this module; an invite token is shown
// once, to the admin who created it, and otherwise only travels in the invite mail.
import { AppError, badRequest, notFound, randomToken, sha256Hex, unauthenticated } from '../shared/index.js';
import { isUniqueViolation, queueMail, type Queryable } from '../store/index.js';
import { countPasswordAttempt, forgivePasswordAttempt, issueToken } from './auth.js';
import {
  compact,
  isAdmin,
  iso,
  listPage,
  requireAdmin,
  type ListQuery,
  type ManagementContext,
  type Policy,
  type Principal,
} from './context.js';
import { hashPassword, verifyPassword } from './passwords.js';

const DAY_MS = 24 * 3600 * 1000;
const inviteTtl = (ctx: ManagementContext) => ctx.mail?.inviteTtlMs ?? 7 * DAY_MS;
const resetTtl = (ctx: ManagementContext) => ctx.mail?.resetTtlMs ?? 3600 * 1000;

export function userView(r: Record<string, unknown>): Record<string, unknown> {
  return compact({
    id: r.id as number,
    accountId: r.account_id as number,
    created: iso(r.created),
    modified: iso(r.modified),
    lastActivity: iso(r.last_activity),
    email: r.email as string,
    name: r.name as string,
    policy: r.policy as Policy,
    releaseUpdate: r.release_update as boolean,
    state: r.state as string,
  });
}

const userNotFound = () => notFound('User', '/userId');
const forbidden = (details: string, pointer: string) =>
  new AppError('permission_denied', details, [{ title: 'Forbidden', details, source: { pointer } }]);
const emailTaken = () =>
  new AppError('conflict', 'This e-mail is already used by another user', [
    { title: 'Conflict', details: 'the e-mail is already used by another user', source: { pointer: '/email' } },
  ]);

/** GET /v1/users: the account's users for admins; only oneself for other users. */
export async function listUsers(ctx: ManagementContext, principal: Principal, query: ListQuery) {
  const admin = isAdmin(principal);
  return listPage(
    ctx.db,
    {
      from: `FROM users WHERE account_id = $1${admin ? '' : ' AND id = $2'}`,
      params: admin ? [principal.accountId] : [principal.accountId, principal.userId],
      query,
      sortable: { id: 'id', email: 'lower(email)', name: 'name', created: 'created', modified: 'modified', lastActivity: 'last_activity', state: 'state' },
      withTotal: true,
    },
    userView,
  );
}

/** A user of the caller's account that the caller may see: any for admins, else only oneself. */
async function visibleUser(db: Queryable, principal: Principal, userId: number): Promise<Record<string, unknown>> {
  if (!isAdmin(principal) && userId !== principal.userId) throw userNotFound();
  const [row] = await db.query(`SELECT * FROM users WHERE id = $1 AND account_id = $2`, [userId, principal.accountId]);
  if (!row) throw userNotFound();
  return row;
}

/** GET /v1/users/{userId}: another user is a 404 for non-admins (its existence is not revealed). */
export async function getUser(ctx: ManagementContext, principal: Principal, userId: number) {
  return userView(await visibleUser(ctx.db, principal, userId));
}

export interface UpdateUserBody {
  email?: string;
  name?: string;
  newPassword?: string;
  password?: string;
  policy?: unknown;
  releaseUpdate?: boolean;
  state?: 'active' | 'disabled';
}

/**
 * PUT /v1/users/{userId}. `policy` and `state` are for admins (403 otherwise); a password is changed
 * only by its owner, who proves the current one (missing: 400, wrong: 401, both on /password), as
 * for a change of one's own e-mail; the password change signs out the owner's other tokens. An
 * account always keeps one active admin.
 */
export async function updateUser(ctx: ManagementContext, principal: Principal, userId: number, body: UpdateUserBody, bearerToken?: string) {
  const admin = isAdmin(principal);
  const self = userId === principal.userId;
  if (!admin && body.policy !== undefined) throw forbidden('Only an admin may change a policy', '/policy');
  if (!admin && body.state !== undefined) throw forbidden('Only an admin may change the state of a user', '/state');
  const target = await visibleUser(ctx.db, principal, userId);
  let passwordHash: string | undefined;
  if (body.newPassword !== undefined && !self) throw forbidden("Only its owner may change a user's password; others use password recovery", '/newPassword');
  // Moving one's own e-mail moves its password recovery too: like a new password, it needs the
  // current one, or a bearer token alone would be enough to take the user over.
  const movesOwnEmail = self && body.email !== undefined && body.email.toLowerCase() !== String(target.email).toLowerCase();
  if (body.newPassword !== undefined || movesOwnEmail) {
    if (body.password === undefined) {
      throw badRequest(`The current password is required to ${body.newPassword !== undefined ? 'set a new one' : 'change the e-mail'}`, '/password');
    }
    // Counted as a login of the user's e-mail: a bearer token must not allow unlimited guesses.
    await countPasswordAttempt(ctx, target.email as string, '/password');
    if (!(await verifyPassword(body.password, target.password_hash as string))) throw unauthenticated('The current password is wrong', '/password');
    await forgivePasswordAttempt(ctx, target.email as string);
  }
  if (body.newPassword !== undefined) passwordHash = await hashPassword(body.newPassword);
  if (body.state === 'active' && target.state === 'invited') {
    throw badRequest('An invited user becomes active by accepting the invite', '/state');
  }
  const policy = body.policy === undefined ? undefined : await checkPolicy(ctx.db, principal.accountId, body.policy, '/policy');
  const now = ctx.clock.now().toISOString();
  try {
    const row = await ctx.db.transaction(async (tx) => {
      // One writer per account at a time, so two admins cannot demote each other at once.
      await tx.query(`SELECT id FROM accounts WHERE id = $1 FOR UPDATE`, [principal.accountId]);
      const losesAdmin = (policy !== undefined && policy.role !== 'admin') || body.state === 'disabled';
      if (losesAdmin) {
        const [others] = await tx.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM users WHERE account_id = $1 AND id <> $2 AND state = 'active' AND policy->>'role' = 'admin'`,
          [principal.accountId, userId],
        );
        const [current] = await tx.query<{ admin: boolean }>(`SELECT state = 'active' AND policy->>'role' = 'admin' AS admin FROM users WHERE id = $1`, [userId]);
        if (current?.admin && others!.n === 0) {
          throw badRequest('An account needs at least one active admin', body.state === 'disabled' ? '/state' : '/policy');
        }
      }
      const [updated] = await tx.query(
        `UPDATE users SET
           email = coalesce($2, email), name = coalesce($3, name), password_hash = coalesce($4, password_hash),
           policy = coalesce($5::jsonb, policy), release_update = coalesce($6, release_update), state = coalesce($7, state),
           modified = $8
         WHERE id = $1 RETURNING *`,
        [userId, body.email ?? null, body.name ?? null, passwordHash ?? null, policy ? JSON.stringify(policy) : null, body.releaseUpdate ?? null, body.state ?? null, now],
      );
      if (passwordHash !== undefined) {
        await tx.query(`DELETE FROM management_tokens WHERE user_id = $1 AND token_hash <> $2`, [userId, bearerToken ? sha256Hex(bearerToken) : '']);
      }
      if (body.state === 'disabled') await tx.query(`DELETE FROM management_tokens WHERE user_id = $1`, [userId]);
      // Tokens already mailed stay with whoever reads the old mailbox: a new address (or a new
      // password) voids them. An invited user gets a new invite at the new address instead.
      const emailChanged = body.email !== undefined && body.email.toLowerCase() !== String(target.email).toLowerCase();
      if (emailChanged || passwordHash !== undefined) {
        await tx.query(`DELETE FROM user_tokens WHERE user_id = $1 AND used_at IS NULL AND (kind = 'reset' OR $2::boolean)`, [userId, emailChanged]);
      }
      let inviteToken: string | undefined;
      if (emailChanged && updated!.state === 'invited') {
        inviteToken = randomToken(32);
        const at = ctx.clock.now();
        await tx.query(`INSERT INTO user_tokens (token_hash, user_id, kind, created, expires) VALUES ($1, $2, 'invite', $3, $4)`, [
          sha256Hex(inviteToken),
          userId,
          at.toISOString(),
          new Date(at.getTime() + inviteTtl(ctx)).toISOString(),
        ]);
        await queueInviteMail(ctx, tx, principal.accountId, updated!.email as string, updated!.name as string, inviteToken, at);
      }
      return { ...updated!, inviteToken };
    });
    if (row.inviteToken !== undefined) ctx.mail?.wake?.();
    return row.inviteToken === undefined ? userView(row) : { ...userView(row), inviteToken: row.inviteToken };
  } catch (e) {
    if (isUniqueViolation(e)) throw emailTaken();
    throw e;
  }
}

/**
 * A policy as the API accepts it: `{"role":"admin"}` or `{"applications":{"<id>":"read"|"write"}}`
 * naming Applications of the account. `acl` of invites may also be that object as a JSON string
 * (the hosted API's clients send it so).
 */
async function checkPolicy(db: Queryable, accountId: number, value: unknown, pointer: string): Promise<Policy> {
  let policy = value;
  if (typeof policy === 'string') {
    try {
      policy = JSON.parse(policy);
    } catch {
      throw badRequest('The policy must be a JSON object', pointer);
    }
  }
  const shape = 'a policy is {"role":"admin"} or {"applications":{"<id>":"read"|"write"}}';
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) throw badRequest(shape, pointer);
  const keys = Object.keys(policy);
  const p = policy as Record<string, unknown>;
  if (keys.length === 1 && keys[0] === 'role') {
    if (p.role !== 'admin') throw badRequest(shape, `${pointer}/role`);
    return { role: 'admin' };
  }
  if (keys.length !== 1 || keys[0] !== 'applications') throw badRequest(shape, pointer);
  const apps = p.applications;
  if (typeof apps !== 'object' || apps === null || Array.isArray(apps)) throw badRequest(shape, `${pointer}/applications`);
  const grants: Record<string, 'read' | 'write'> = {};
  for (const [id, access] of Object.entries(apps)) {
    if (!/^[1-9][0-9]{0,9}$/.test(id) || Number(id) > 2147483647) throw badRequest(`${JSON.stringify(id)} is not an Application id`, `${pointer}/applications/${id}`);
    if (access !== 'read' && access !== 'write') throw badRequest('access is "read" or "write"', `${pointer}/applications/${id}`);
    grants[id] = access;
  }
  const ids = Object.keys(grants).map(Number);
  if (ids.length > 0) {
    const rows = await db.query<{ id: number }>(`SELECT id FROM applications WHERE account_id = $1 AND id = ANY($2::int[])`, [accountId, ids]);
    const known = new Set(rows.map((r) => r.id));
    for (const id of ids) if (!known.has(id)) throw badRequest(`Application ${id} not found`, `${pointer}/applications/${id}`);
  }
  return { applications: grants };
}

export interface InviteBody {
  acl: unknown;
  email: string;
  name?: string;
}

/** POST /v1/invites (admins): an `invited` user and the invite mail; the token is in the answer this once. */
export async function createInvite(ctx: ManagementContext, principal: Principal, body: InviteBody) {
  requireAdmin(principal);
  const policy = await checkPolicy(ctx.db, principal.accountId, body.acl, '/acl');
  const token = randomToken(32);
  const now = ctx.clock.now();
  const row = await ctx.db.transaction(async (tx) => {
    const [user] = await tx.query(
      `INSERT INTO users (account_id, email, name, password_hash, policy, state, created, modified)
       VALUES ($1, $2, $3, '', $4::jsonb, 'invited', $5, $5)
       ON CONFLICT ((lower(email))) DO NOTHING RETURNING *`,
      [principal.accountId, body.email, body.name ?? '', JSON.stringify(policy), now.toISOString()],
    );
    if (!user) throw emailTaken();
    await tx.query(`INSERT INTO user_tokens (token_hash, user_id, kind, created, expires) VALUES ($1, $2, 'invite', $3, $4)`, [
      sha256Hex(token),
      user.id,
      now.toISOString(),
      new Date(now.getTime() + inviteTtl(ctx)).toISOString(),
    ]);
    await queueInviteMail(ctx, tx, principal.accountId, body.email, body.name ?? '', token, now);
    return user;
  });
  ctx.mail?.wake?.();
  return { ...userView(row), inviteToken: token };
}

async function queueInviteMail(ctx: ManagementContext, tx: Queryable, accountId: number, to: string, name: string, token: string, now: Date) {
  const [account] = await tx.query<{ company_name: string }>(`SELECT company_name FROM accounts WHERE id = $1`, [accountId]);
  const days = Math.round(inviteTtl(ctx) / DAY_MS);
  await queueMail(
    tx,
    {
      accountId,
      kind: 'invite',
      to,
      subject: 'You are invited to Perkline',
      text: [
        `Hello${name ? ` ${name}` : ''},`,
        '',
        `you are invited to the Perkline account${account?.company_name ? ` of ${account.company_name}` : ''}.`,
        'To accept, send POST /v1/accept_invite with your e-mail, your name, a password and this invite token:',
        '',
        token,
        '',
        `The token works once and expires in ${days} day${days === 1 ? '' : 's'}.`,
      ].join('\n'),
    },
    now,
  );
}

/** POST /v1/invite_emails (admins): sends the invite mail of a pending invite again. */
export async function resendInvite(ctx: ManagementContext, principal: Principal, body: { email: string; token: string }) {
  requireAdmin(principal);
  const now = ctx.clock.now();
  const row = await ctx.db.transaction(async (tx) => {
    const [user] = await tx.query(`SELECT * FROM users WHERE account_id = $1 AND lower(email) = lower($2) AND state = 'invited'`, [
      principal.accountId,
      body.email,
    ]);
    if (!user) throw notFound('Invited user', '/email');
    const [live] = await tx.query(
      `SELECT 1 FROM user_tokens WHERE token_hash = $1 AND user_id = $2 AND kind = 'invite' AND used_at IS NULL AND expires > $3`,
      [sha256Hex(body.token), user.id, now.toISOString()],
    );
    if (!live) throw badRequest('The token is not a valid invite token of this user', '/token');
    await queueInviteMail(ctx, tx, principal.accountId, user.email as string, user.name as string, body.token, now);
    return user;
  });
  ctx.mail?.wake?.();
  return userView(row);
}

/** Marks a token used if it is live; the conditional update makes it single-use under races. */
async function consumeToken(tx: Queryable, token: string, kind: 'invite' | 'reset', now: Date): Promise<number | undefined> {
  const [row] = await tx.query<{ user_id: number }>(
    `UPDATE user_tokens SET used_at = $3 WHERE token_hash = $1 AND kind = $2 AND used_at IS NULL AND expires > $3 RETURNING user_id`,
    [sha256Hex(token), kind, now.toISOString()],
  );
  return row?.user_id;
}

export interface AcceptInviteBody {
  email: string;
  inviteToken: string;
  name?: string;
  password: string;
}

/** POST /v1/accept_invite: activates the invited user (with this e-mail, which may differ) and logs in. */
export async function acceptInvite(ctx: ManagementContext, body: AcceptInviteBody) {
  const passwordHash = await hashPassword(body.password);
  const now = ctx.clock.now();
  try {
    return await ctx.db.transaction(async (tx) => {
      const userId = await consumeToken(tx, body.inviteToken, 'invite', now);
      if (userId === undefined) throw unauthenticated('The invite token is invalid, used or expired', '/inviteToken');
      const [user] = await tx.query(
        `UPDATE users SET email = $2, name = coalesce($3, name), password_hash = $4, state = 'active', modified = $5
          WHERE id = $1 AND state = 'invited' RETURNING id`,
        [userId, body.email, body.name ?? null, passwordHash, now.toISOString()],
      );
      if (!user) throw unauthenticated('The invite token is invalid, used or expired', '/inviteToken');
      return issueToken(ctx, tx, userId);
    });
  } catch (e) {
    if (isUniqueViolation(e)) throw emailTaken();
    throw e;
  }
}

/** Reset mails per user within an hour: more requests are answered alike and send nothing. */
export const RECOVERY_MAILS_PER_WINDOW = 5;
const RECOVERY_WINDOW_MS = 3600 * 1000;

/**
 * POST /v1/password_recovery_emails: queues a reset mail when an active user has the e-mail (at
 * most RECOVERY_MAILS_PER_WINDOW an hour); the answer is the same 204 either way, so the endpoint
 * does not tell which e-mails exist.
 */
export async function requestPasswordRecovery(ctx: ManagementContext, body: { email: string }): Promise<void> {
  const now = ctx.clock.now();
  const token = randomToken(32);
  const queued = await ctx.db.transaction(async (tx) => {
    const [user] = await tx.query<{ id: number; account_id: number; email: string; name: string }>(
      `SELECT id, account_id, email, name FROM users WHERE lower(email) = lower($1) AND state = 'active' FOR UPDATE`,
      [body.email],
    );
    if (!user) return false;
    // Anyone may ask, without logging in: a limit per user keeps this from flooding its mailbox.
    const [recent] = await tx.query<{ n: number }>(`SELECT count(*)::int AS n FROM user_tokens WHERE user_id = $1 AND kind = 'reset' AND created > $2`, [
      user.id,
      new Date(now.getTime() - RECOVERY_WINDOW_MS).toISOString(),
    ]);
    if (recent!.n >= RECOVERY_MAILS_PER_WINDOW) return false;
    const minutes = Math.round(resetTtl(ctx) / 60_000);
    await tx.query(`INSERT INTO user_tokens (token_hash, user_id, kind, created, expires) VALUES ($1, $2, 'reset', $3, $4)`, [
      sha256Hex(token),
      user.id,
      now.toISOString(),
      new Date(now.getTime() + resetTtl(ctx)).toISOString(),
    ]);
    await queueMail(
      tx,
      {
        accountId: user.account_id,
        kind: 'password_reset',
        to: user.email,
        subject: 'Reset your Perkline password',
        text: [
          `Hello${user.name ? ` ${user.name}` : ''},`,
          '',
          'someone asked to reset the password of your Perkline user. If it was you, send POST /v1/reset_password',
          'with a new password and this reset token:',
          '',
          token,
          '',
          `The token works once and expires in ${minutes} minutes. If it was not you, ignore this mail.`,
        ].join('\n'),
      },
      now,
    );
    return true;
  });
  if (queued) ctx.mail?.wake?.();
}

/** POST /v1/reset_password: sets the password and signs the user out everywhere. */
export async function resetPassword(ctx: ManagementContext, body: { password: string; resetToken: string }): Promise<void> {
  const passwordHash = await hashPassword(body.password);
  const now = ctx.clock.now();
  await ctx.db.transaction(async (tx) => {
    const userId = await consumeToken(tx, body.resetToken, 'reset', now);
    if (userId === undefined) throw unauthenticated('The reset token is invalid, used or expired', '/resetToken');
    await tx.query(`UPDATE users SET password_hash = $2, modified = $3 WHERE id = $1`, [userId, passwordHash, now.toISOString()]);
    await tx.query(`DELETE FROM management_tokens WHERE user_id = $1`, [userId]);
    // Other reset mails of this user are moot now.
    await tx.query(`DELETE FROM user_tokens WHERE user_id = $1 AND kind = 'reset' AND used_at IS NULL`, [userId]);
  });
}
