import type { Clock, ConfigEvents, Logger } from '../shared/index.js';
import { AppError, badRequest, notFound } from '../shared/index.js';
import type { Db, Queryable } from '../store/index.js';

export interface ManagementContext {
  db: Db;
  events: ConfigEvents;
  clock: Clock;
  logger: Logger;
  /** Lifetime of a bearer token (default 7 days). */
  tokenTtlMs: number;
  /** Mail of the user use cases; without it mails are still queued, only picked up at the next poll. */
  mail?: MailSettings;
  /**
   * Outbound requests (notifications): `wake` tells the node's outbox dispatcher that a use case
   * wrote some, so that they leave at once; without it they leave at the next poll.
   */
  outbound?: { wake?: () => void };
  /** Asynchronous coupon creation: `wake` tells the node's job runner that a job was queued. */
  couponJobs?: { wake?: () => void };
}

/** After a commit that wrote `written` outbound requests: the local dispatcher sends them now. */
export function outboundWritten(ctx: ManagementContext, written: number): void {
  if (written > 0) ctx.outbound?.wake?.();
}

/** The caller's name as changes show it (`createdBy`, a notification's `EmployeeName`): the user's name, else the e-mail. */
export async function userName(db: Queryable, principal: Principal): Promise<string> {
  const [u] = await db.query<{ name: string; email: string }>(`SELECT name, email FROM users WHERE id = $1`, [principal.userId]);
  return u ? u.name || u.email : '';
}

export interface MailSettings {
  /** Tells the node's mail dispatcher that a mail was queued. */
  wake?: () => void;
  /** Lifetime of an invite token (default 7 days). */
  inviteTtlMs?: number;
  /** Lifetime of a password-reset token (default 1 hour). */
  resetTtlMs?: number;
}

/** Who calls the Management API: the user behind a bearer token. */
export interface Principal {
  userId: number;
  accountId: number;
  policy: Policy;
}

export interface Policy {
  role?: 'admin';
  applications?: Record<string, 'read' | 'write'>;
}

export const isAdmin = (p: Principal): boolean => p.policy.role === 'admin';

/**
 * Resolves an Application of the caller's account that the caller may read (or write). Another
 * account's Application, or one the policy does not name, is "not found": its existence is not
 * revealed. A readable Application that may not be written is a 403.
 */
export async function requireApplication(
  db: Queryable,
  principal: Principal,
  applicationId: number,
  access: 'read' | 'write',
): Promise<Record<string, unknown>> {
  const [row] = await db.query(`SELECT * FROM applications WHERE id = $1 AND account_id = $2`, [
    applicationId,
    principal.accountId,
  ]);
  if (!row) throw notFound('Application', '/applicationId');
  if (isAdmin(principal)) return row;
  const granted = principal.policy.applications?.[String(applicationId)];
  if (!granted) throw notFound('Application', '/applicationId');
  if (access === 'write' && granted !== 'write') {
    throw new AppError('permission_denied', 'This user may not change this Application', [
      { title: 'Forbidden', details: 'write access to the Application is required', source: { pointer: '/applicationId', parameter: 'applicationId' } },
    ]);
  }
  return row;
}

/**
 * Of these Application ids, the ones the caller may see (all of them for an admin): account-level
 * resources (loyalty programs, attributes) name to a non-admin no Application outside its policy.
 */
export const visibleApplicationIds = (principal: Principal, ids: readonly number[]): number[] =>
  isAdmin(principal) ? [...ids] : ids.filter((id) => principal.policy.applications?.[String(id)] !== undefined);

export function requireAdmin(principal: Principal): void {
  if (!isAdmin(principal)) {
    throw new AppError('permission_denied', 'Only an admin may do this', [
      { title: 'Forbidden', details: 'admin role required', source: { pointer: '/headers/authorization', parameter: 'Authorization' } },
    ]);
  }
}

export interface ListQuery {
  pageSize?: number;
  skip?: number;
  sort?: string;
}

/** `ORDER BY ... LIMIT ... OFFSET ...` for a list, with `sort` checked against the allowed fields. */
export function paging(query: ListQuery, sortable: Record<string, string>, defaultSort = 'id'): { clause: string; pageSize: number; skip: number } {
  const pageSize = query.pageSize ?? 1000;
  const skip = query.skip ?? 0;
  // Both end up in the SQL text: only whole numbers the database can take get there (the query
  // validator lets `skip=1e400` through as Infinity, and 1e20 is past bigint).
  if (!Number.isSafeInteger(pageSize) || pageSize < 1) throw badRequest('`pageSize` must be a whole number from 1 to 1000', '/query/pageSize');
  if (!Number.isSafeInteger(skip) || skip < 0) throw badRequest(`\`skip\` must be a whole number from 0 to ${Number.MAX_SAFE_INTEGER}`, '/query/skip');
  const sort = query.sort ?? defaultSort;
  const desc = sort.startsWith('-');
  const field = desc ? sort.slice(1) : sort;
  const column = sortable[field];
  if (!column) throw badRequest(`Cannot sort by ${JSON.stringify(field)}; sortable fields: ${Object.keys(sortable).join(', ')}`, '/query/sort');
  const tie = column === 'id' ? '' : `, id ${desc ? 'DESC' : 'ASC'}`;
  return { clause: `ORDER BY ${column} ${desc ? 'DESC' : 'ASC'}${tie} LIMIT ${pageSize} OFFSET ${skip}`, pageSize, skip };
}

export const iso = (v: unknown): string | undefined =>
  v === null || v === undefined ? undefined : v instanceof Date ? v.toISOString() : String(v);

/** Drops undefined values so optional fields are absent rather than null. */
export function compact<T extends Record<string, unknown>>(o: T): T {
  for (const k of Object.keys(o)) if (o[k] === undefined) delete o[k];
  return o;
}

export interface ListPageOptions {
  /** `FROM ... WHERE ...` of the rows, with `$n` parameters from `params`. */
  from: string;
  params: readonly unknown[];
  query: ListQuery;
  /** API field name → SQL column (or expression) that `sort` may name. */
  sortable: Record<string, string>;
  defaultSort?: string;
  /** true: `{ totalResultSize, data }`; false (the `no_total` variants): `{ hasMore, data }`. */
  withTotal: boolean;
  /** What is selected (default `*`). */
  select?: string;
}

/**
 * One page of a Management list, the spec's way: `pageSize` (1–1000, default 1000), `skip`,
 * `sort` (an unknown field is a 400 on `/query/sort`), and either the total or `hasMore` (one row
 * more is read instead of counting, which is what the `no_total` variants are for).
 */
export async function listPage<R>(
  db: Queryable,
  options: ListPageOptions,
  view: (row: Record<string, unknown>) => R,
): Promise<{ data: R[]; totalResultSize: number } | { data: R[]; hasMore: boolean }> {
  const { pageSize, skip } = paging(options.query, options.sortable, options.defaultSort);
  const order = paging({ ...options.query, pageSize: options.withTotal ? pageSize : pageSize + 1, skip }, options.sortable, options.defaultSort).clause;
  const rows = await db.query(`SELECT ${options.select ?? '*'} ${options.from} ${order}`, [...options.params]);
  if (!options.withTotal) {
    return { hasMore: rows.length > pageSize, data: rows.slice(0, pageSize).map(view) };
  }
  const [count] = await db.query<{ n: number }>(`SELECT count(*)::int AS n ${options.from}`, [...options.params]);
  return { totalResultSize: count!.n, data: rows.map(view) };
}
