// Codes and ids the engine makes (created coupons and referrals, loyalty transactions). They come
// from the evaluation's seed, so an evaluation inline and in a worker makes the same ones; the
// integration layer checks uniqueness when it stores them.
import { fnv1a } from '../shared/index.js';
import type { EvalContext } from './runtime.js';
import type { CodeSettings } from './types.js';

const DEFAULT_CHARS = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'];
const DEFAULT_PATTERN = '####-####';

/** mulberry32: a small, good-enough PRNG for code characters. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const nextSeed = (ctx: EvalContext, kind: string): number =>
  fnv1a(`${ctx.input.facts?.seed ?? ''}|${String((ctx.input.session as { IntegrationId?: unknown }).IntegrationId ?? '')}|${ctx.campaign.id}|${kind}|${ctx.serial.n++}`);

/** A code following the pattern: each `#` becomes a random character of validCharacters. */
export function generateCode(ctx: EvalContext, settings: CodeSettings | undefined): string {
  const chars = settings?.validCharacters && settings.validCharacters.length > 0 ? settings.validCharacters : DEFAULT_CHARS;
  const pattern = settings?.couponPattern ?? DEFAULT_PATTERN;
  const rand = prng(nextSeed(ctx, 'code'));
  let out = '';
  for (const c of pattern) out += c === '#' ? chars[Math.floor(rand() * chars.length)]! : c;
  return out;
}

/** An RFC 4122 version 4 shaped id from the seed. */
export function transactionId(ctx: EvalContext): string {
  const rand = prng(nextSeed(ctx, 'tx'));
  const hex = Array.from({ length: 32 }, () => Math.floor(rand() * 16).toString(16));
  hex[12] = '4';
  hex[16] = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
  const h = hex.join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
