// Filters that coupon and referral lists share (code matching, validity, usability), kept out of
// the module's exports: they are SQL building blocks, not use cases.

export type Validity = 'expired' | 'validNow' | 'validFuture';

/** `WHERE` conditions with their parameters, numbered after the ones already there. */
export class Conditions {
  readonly parts: string[] = [];
  constructor(readonly params: unknown[]) {}
  /** The placeholder of a new parameter. */
  p(value: unknown): string {
    this.params.push(value);
    return `$${this.params.length}`;
  }
  add(sql: string): void {
    this.parts.push(sql);
  }
  get sql(): string {
    return this.parts.map((s) => ` AND ${s}`).join('');
  }
}

/**
 * Codes compared the spec's way: case-insensitive, and only letters and digits count. Only ASCII
 * letters and digits are kept, so that JS and the database fold alike whatever the collation; after
 * folding no LIKE wildcard (% or _) is left in a search term.
 */
export const foldCode = (s: string): string => s.toLowerCase().replace(/[^a-z0-9]/g, '');
/** foldCode of a column, in SQL. */
export const FOLDED = (column: string) => `regexp_replace(lower(${column}), '[^a-z0-9]', '', 'g')`;

/** The `valid` filter: expired, valid now, or valid only in the future (start date ahead). */
export function validity(w: Conditions, valid: Validity | undefined, now: string): void {
  if (!valid) return;
  const t = `${w.p(now)}::timestamptz`;
  if (valid === 'expired') w.add(`expiry_date IS NOT NULL AND expiry_date <= ${t}`);
  else if (valid === 'validNow') w.add(`(start_date IS NULL OR start_date <= ${t}) AND (expiry_date IS NULL OR expiry_date > ${t})`);
  else w.add(`start_date > ${t} AND (expiry_date IS NULL OR expiry_date > ${t})`);
}

/** `usable`: true = uses left (usageCounter below usageLimit, or no limit); false = the limit is reached. */
export function usability(w: Conditions, usable: boolean | undefined): void {
  if (usable === true) w.add(`(usage_limit = 0 OR usage_counter < usage_limit)`);
  else if (usable === false) w.add(`usage_limit > 0 AND usage_counter >= usage_limit`);
}
