// The templates of rule-triggered webhooks (service-spec "Webhook (Management)"): a URL or payload
// with `${$Profile.Attributes.<name>}`, `${$Campaign.Attributes.<name>}` and `${$<param>}`
// references. The Management API checks them when a webhook is saved; the Integration API fills
// them in when a rule triggers the webhook.

/** A piece of a template: literal text, or a reference to fill in. */
export type TemplatePart =
  | { text: string }
  | { root: 'Profile' | 'Campaign'; name: string; at: number }
  | { param: string; at: number };

/** Why a template cannot be used, with the character where the problem starts. */
export class TemplateError extends Error {
  constructor(
    message: string,
    readonly at: number,
    readonly title: 'InvalidTemplate',
  ) {
    super(message);
  }
}

const REFERENCE = /^\$(?:(Profile|Campaign)\.Attributes\.([A-Za-z][A-Za-z0-9_]*)|([A-Za-z_][A-Za-z0-9_]*))$/;

/** Splits a template into text and references; throws TemplateError on a malformed reference. */
export function parseTemplate(template: string): TemplatePart[] {
  const parts: TemplatePart[] = [];
  let at = 0;
  for (;;) {
    const start = template.indexOf('${', at);
    if (start < 0) {
      if (at < template.length) parts.push({ text: template.slice(at) });
      return parts;
    }
    const end = template.indexOf('}', start + 2);
    if (end < 0) throw new TemplateError(`Unterminated template reference at character ${start}`, start, 'InvalidTemplate');
    const ref = template.slice(start + 2, end).trim();
    const m = REFERENCE.exec(ref);
    if (!m) {
      throw new TemplateError(
        `Template reference \${${ref}} is not one of \${$Profile.Attributes.<name>}, \${$Campaign.Attributes.<name>} or \${$<param>}`,
        start,
        'InvalidTemplate',
      );
    }
    if (start > at) parts.push({ text: template.slice(at, start) });
    parts.push(m[1] !== undefined ? { root: m[1] as 'Profile' | 'Campaign', name: m[2]!, at: start } : { param: m[3]!, at: start });
    at = end + 1;
  }
}

/** What a reference stands for when the template is filled in (undefined: nothing known). */
export type TemplateValues = (part: Exclude<TemplatePart, { text: string }>) => unknown;

/** Fills the references in, each value written by `escape`. */
export function renderTemplate(parts: readonly TemplatePart[], values: TemplateValues, escape: (value: unknown) => string): string {
  let out = '';
  for (const p of parts) out += 'text' in p ? p.text : escape(values(p));
  return out;
}

/**
 * A value in a JSON payload: a string is escaped to stand inside the template's quotes (`"${$x}"`);
 * numbers, booleans, null, lists and objects are written as JSON; an unknown value is empty.
 */
export function jsonValue(value: unknown): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return JSON.stringify(value).slice(1, -1);
  return JSON.stringify(value) ?? '';
}

/** A lone UTF-16 surrogate, which has no UTF-8 form. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * A value in a URL: percent-encoded, so that it stays one part of the URL; unknown is empty. A
 * lone surrogate (a session attribute sent as "\ud800", half of an emoji cut by a rule) is
 * written as U+FFFD, as the database stores it: encodeURIComponent threw on it, and the commit
 * that made the webhook's effect final failed.
 */
export function urlValue(value: unknown): string {
  if (value === undefined || value === null) return '';
  const text = typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value);
  return encodeURIComponent(text.replace(LONE_SURROGATE, '\ufffd'));
}
