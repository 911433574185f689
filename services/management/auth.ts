import { AppError, randomToken, sha256Hex, unauthenticated } from '../shared/index.js';
import type { Queryable } from '../store/index.js';
import { hashPassword, verifyPassword } from './passwords.js';
import { iso, type ManagementContext, type Policy, type Principal } from './context.js';

export interface BootstrapOptions {
  email: string;
  /** When absent a password is generated and returned (printed once by the node entry). */
  password?: string | undefined;
}

export interface BootstrapResult {
  created: boolean;
  email: string;
  /** Only when it was generated now. */
  generatedPassword?: string;
}

/**
 * On first start (no user yet): creates the account and its admin user. Later starts change
 * nothing, so a password set through the API is never overwritten by the environment.
 */
export async function bootstrapAdmin(ctx: ManagementContext, options: BootstrapOptions): Promise<BootstrapResult> {
  const generated = options.password ? undefined : randomToken(12);
  const passwordHash = await hashPassword(options.password ?? generated!);
  return ctx.db.transaction(async (tx) => {
    await tx.query(`SELECT pg_advisory_xact_lock(7263502)`);
    const existing = await tx.query(`SELECT 1 FROM users LIMIT 1`);
    if (existing.length > 0) return { created: false, email: options.email };
    const [account] = await tx.query<{ id: number }>(`INSERT INTO accounts (company_name) VALUES ('') RETURNING id`);
    await tx.query(
      `INSERT INTO users (account_id, email, name, password_hash, policy, state) VALUES ($1, $2, 'Admin', $3, $4::jsonb, 'active')`,
      [account!.id, options.email, passwordHash, JSON.stringify({ role: 'admin' })],
    );
    return { created: true, email: options.email, ...(generated ? { generatedPassword: generated } : {}) };
  });
}

export const LOGIN_FAILURE_LIMIT = 5;
export const LOGIN_WINDOW_MS = 15 * 60 * 1000;

/**
 * POST /v1/sessions. 5 failed logins for one e-mail within 15 minutes (a window that starts at the
 * first attempt) refuse further attempts with a 429 until the window ends, whether or not a user
 * has that e-mail. Every attempt is counted before the password is checked, in one conditional
 * upsert, so parallel guesses cannot slip past the limit; a success takes its own count back.
 */
export async function login(ctx: ManagementContext, email: string, password: string): Promise<{ created: string; token: string; userId: number }> {
  await countPasswordAttempt(ctx, email, '/email');
  const [user] = await ctx.db.query<{ id: number; password_hash: string; state: string }>(
    `SELECT id, password_hash, state FROM users WHERE lower(email) = lower($1)`,
    [email],
  );
  // Verify against a dummy hash when the user is unknown so timing does not reveal which e-mails exist.
  const ok = await verifyPassword(password, user?.password_hash || DUMMY_HASH);
  if (!user || !ok || user.state !== 'active') {
    // Old windows of other e-mails go here, so the table holds only the last 15 minutes.
    await ctx.db.query(`DELETE FROM login_throttle WHERE window_start <= $1`, [new Date(ctx.clock.now().getTime() - LOGIN_WINDOW_MS).toISOString()]);
    throw unauthenticated('Invalid e-mail or password', '/password');
  }
  await forgivePasswordAttempt(ctx, email);
  return issueToken(ctx, ctx.db, user.id);
}

/**
 * Counts an attempt to prove the password of `email` (a login, or the current password of a
 * password change) before it is checked, and refuses it with a 429 on `pointer` once more than
 * LOGIN_FAILURE_LIMIT attempts fell into the window. Every check of a password goes through here,
 * so that no endpoint is a way around the limit.
 */
export async function countPasswordAttempt(ctx: ManagementContext, email: string, pointer: string): Promise<void> {
  const key = email.toLowerCase();
  const now = ctx.clock.now();
  const windowStart = new Date(now.getTime() - LOGIN_WINDOW_MS).toISOString();
  const [attempt] = await ctx.db.query<{ failures: number; window_start: Date | string }>(
    `INSERT INTO login_throttle AS t (email, window_start, failures) VALUES ($1, $2, 1)
     ON CONFLICT (email) DO UPDATE SET
       failures = CASE WHEN t.window_start <= $3 THEN 1 ELSE t.failures + 1 END,
       window_start = CASE WHEN t.window_start <= $3 THEN $2 ELSE t.window_start END
     RETURNING failures, window_start`,
    [key, now.toISOString(), windowStart],
  );
  if (attempt!.failures > LOGIN_FAILURE_LIMIT) {
    const endsMs = new Date(iso(attempt!.window_start)!).getTime() + LOGIN_WINDOW_MS;
    const retryAfter = Math.max(1, Math.ceil((endsMs - now.getTime()) / 1000));
    throw new AppError(
      'too_many_requests',
      'Too many failed logins for this e-mail; try again later',
      [{ title: 'Too Many Requests', details: `more than ${LOGIN_FAILURE_LIMIT} failed logins within 15 minutes`, source: { pointer } }],
      retryAfter,
    );
  }
}

/** The attempt counted by countPasswordAttempt did not fail, so it comes off again. */
export async function forgivePasswordAttempt(ctx: ManagementContext, email: string): Promise<void> {
  await ctx.db.query(`UPDATE login_throttle SET failures = greatest(failures - 1, 0) WHERE email = $1`, [email.toLowerCase()]);
}

/** A new bearer token for the user (login, accepted invite). */
export async function issueToken(ctx: ManagementContext, db: Queryable, userId: number): Promise<{ created: string; token: string; userId: number }> {
  const token = randomToken(32);
  const now = ctx.clock.now();
  const expires = new Date(now.getTime() + ctx.tokenTtlMs);
  await db.query(`INSERT INTO management_tokens (token_hash, user_id, created, expires) VALUES ($1, $2, $3, $4)`, [
    sha256Hex(token),
    userId,
    now.toISOString(),
    expires.toISOString(),
  ]);
  await db.query(`UPDATE users SET last_activity = $2 WHERE id = $1`, [userId, now.toISOString()]);
  return { created: now.toISOString(), token, userId };
}

/** DELETE /v1/sessions: the token stops working at once. */
export async function logout(ctx: ManagementContext, token: string): Promise<void> {
  await ctx.db.query(`DELETE FROM management_tokens WHERE token_hash = $1`, [sha256Hex(token)]);
}

/** Resolves `Authorization: Bearer <token>` to its user; expired or revoked tokens are refused. */
export async function authenticateBearer(ctx: ManagementContext, authorization: string | undefined): Promise<Principal> {
  const match = /^Bearer\s+(\S+)$/i.exec(authorization ?? '');
  if (!match) throw unauthenticated('Missing bearer token');
  const [row] = await ctx.db.query<{ user_id: number; account_id: number; policy: Policy; expires: Date }>(
    `SELECT t.user_id, u.account_id, u.policy, t.expires
       FROM management_tokens t JOIN users u ON u.id = t.user_id
      WHERE t.token_hash = $1 AND u.state = 'active'`,
    [sha256Hex(match[1]!)],
  );
  if (!row || new Date(iso(row.expires)!).getTime() <= ctx.clock.now().getTime()) {
    throw unauthenticated('Invalid or expired token');
  }
  return { userId: row.user_id, accountId: row.account_id, policy: row.policy };
}

// A fixed scrypt hash of a random string, used only to spend the same time on unknown users.
const DUMMY_HASH = 'scrypt$AAAAAAAAAAAAAAAAAAAAAA==$' + Buffer.alloc(32).toString('base64');
