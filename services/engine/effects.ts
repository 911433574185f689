// Effect calls of a rule (rules.md section 4): compiled like expressions, emitting effect records.
import { compileExpr, type Scope } from './compile.js';
import { addDuration, isDuration } from './calendar.js';
import { generateCode, transactionId } from './codes.js';
import { applyTo, startBlock, type Env, type EvalContext, type Fn } from './runtime.js';
import { profileIdProblem } from '../shared/index.js';
import { EvalError } from './types.js';
import { formatTime, parseTime, typeName } from './values.js';

export interface RawEffect {
  effectType: string;
  props: Record<string, unknown>;
}

export type CompiledEffect = (env: Env, out: RawEffect[]) => void;

type ArgKind = 'string' | 'number' | 'any' | 'options' | 'id';

interface EffectDef {
  /** Kinds of the positional arguments; an 'options' kind must be last and may be omitted. */
  args: ArgKind[];
  optional?: number;
  emit: (values: unknown[], env: Env) => RawEffect | undefined;
}

const str = (v: unknown, what: string): string => {
  if (typeof v !== 'string') throw new EvalError(`${what} must be a string, got ${typeName(v)}`);
  return v;
};
const num = (v: unknown, what: string): number => {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new EvalError(`${what} must be a number, got ${typeName(v)}`);
  return v;
};

/** The position of the cart item bound by the innermost block, for per-item effects in forEach. */
function boundItemPosition(env: Env): number | undefined {
  for (let f = env.frame; f; f = f.parent) {
    const v = f.value as { Position?: unknown } | null;
    if (v && typeof v === 'object' && typeof v.Position === 'number') return v.Position;
  }
  return undefined;
}

const ctxOf = (env: Env, effect: string): EvalContext => {
  if (!env.ctx) throw new EvalError(`${effect} needs a campaign evaluation`);
  return env.ctx;
};
const options = (v: unknown): Record<string, unknown> => (v === undefined ? {} : (v as Record<string, unknown>));
const optString = (o: Record<string, unknown>, key: string): string | undefined => {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  return str(v, key);
};
/** A profile ID a rule names: it is stored under an index, so it must be one the API would take. */
const profileIdOf = (id: string | undefined, what: string): string | undefined => {
  const problem = id === undefined ? undefined : profileIdProblem(id);
  if (problem) throw new EvalError(`${what} ${problem}`);
  return id;
};
/**
 * A subledger named by a loyalty effect: part of the ledger's key in the database, so at most as
 * long as the Management API takes (1000 characters, 2000 bytes of UTF-8).
 */
const subledgerOf = (o: Record<string, unknown>): string => {
  const id = optString(o, 'subledgerId') ?? '';
  if (id.length > 1000 || Buffer.byteLength(id, 'utf8') > 2000) throw new EvalError('subledgerId must be at most 1000 characters and 2000 bytes of UTF-8');
  return id;
};
const profileOf = (env: Env): string => String((env.roots.Session as { ProfileId?: unknown } | undefined)?.ProfileId ?? '');
const idOf = (v: unknown, what: string): string => {
  if (typeof v === 'number' || typeof v === 'string') return String(v);
  throw new EvalError(`${what} must be an id, got ${typeName(v)}`);
};
/** now + duration in the Application's calendar, as a time; undefined without a duration. */
const after = (env: Env, duration: string | undefined, what: string): string | undefined => {
  if (duration === undefined || duration === 'unlimited') return undefined;
  if (!isDuration(duration)) throw new EvalError(`${what} must be a duration such as 30D or 1Y, got ${JSON.stringify(duration)}`);
  const now = parseTime(ctxOf(env, what).input.now)!;
  return formatTime(addDuration(now, duration, env.timezone, 1));
};
const positive = (v: unknown, what: string): number => {
  const n = num(v, what);
  if (n <= 0) throw new EvalError(`${what} must be positive, got ${n}`);
  return n;
};
const audience = (type: 'addToAudience' | 'removeFromAudience'): EffectDef => ({
  args: ['id'],
  emit: ([id], env) => {
    const audienceId = idOf(id, 'audience id');
    const facts = ctxOf(env, type).input.facts?.audiences?.[audienceId];
    if (!facts) throw new EvalError(`unknown audience ${audienceId}`);
    return { effectType: type, props: { audienceId: Number(audienceId), audienceName: facts.name, profileIntegrationId: profileOf(env) } };
  },
});

/**
 * The ledger a loyalty effect acts on, checked against the loyalty facts when the integration
 * gave them: the program must be one of the Application's, a card-based program needs an active
 * card of it in the session (its points live on the card), and a profile-based one a profile.
 * Returns the card's identifier for card-based programs (`cardIdentifier`), nothing otherwise.
 */
function loyaltyLedgerOf(env: Env, programId: number): { cardIdentifier?: string } {
  const facts = env.ctx?.input.facts?.loyalty;
  if (!facts) return {};
  const fact = facts[String(programId)];
  if (!fact) throw new EvalError(`LoyaltyProgramNotFound: loyalty program ${programId} is not one of the Application's`);
  if (fact.cardBased) {
    if (fact.card !== undefined) return { cardIdentifier: fact.card };
    if (fact.blockedCard !== undefined) throw new EvalError(`LoyaltyCardBlocked: loyalty card ${JSON.stringify(fact.blockedCard)} of program ${programId} is blocked`);
    throw new EvalError(`LoyaltyCardRequired: program ${programId} is card-based and the session names no card of it in loyaltyCards`);
  }
  if (profileOf(env) === '') throw new EvalError(`ProfileRequired: loyalty program ${programId} keeps points on profiles and the session has none`);
  return {};
}

const ATTRIBUTE_PATH = /^(Session|Profile)\.Attributes\.[^.].*$/;

const effects: Record<string, EffectDef> = {
  setDiscount: {
    args: ['string', 'number'],
    emit: ([name, value]) => ({ effectType: 'setDiscount', props: { name: str(name, 'name'), value: num(value, 'value') } }),
  },
  setDiscountPerItem: {
    args: ['string', 'number', 'number'],
    optional: 1,
    emit: ([name, value, position], env) => {
      const p = position === undefined ? boundItemPosition(env) : num(position, 'position');
      if (p === undefined) throw new EvalError('setDiscountPerItem needs a position or a cart item bound by forEach');
      return { effectType: 'setDiscountPerItem', props: { name: str(name, 'name'), value: num(value, 'value'), position: p } };
    },
  },
  setDiscountPerAdditionalCost: {
    args: ['string', 'string', 'number'],
    emit: ([name, cost, value]) => ({
      effectType: 'setDiscountPerAdditionalCost',
      props: { name: str(name, 'name'), additionalCost: str(cost, 'additional cost'), value: num(value, 'value') },
    }),
  },
  addFreeItem: {
    args: ['string', 'string'],
    emit: ([sku, name]) => ({ effectType: 'addFreeItem', props: { sku: str(sku, 'sku'), name: str(name, 'name') } }),
  },
  createCoupon: {
    args: ['options'],
    optional: 1,
    emit: ([opts], env) => {
      const ctx = ctxOf(env, 'createCoupon');
      const o = options(opts);
      const usageLimit = o.usageLimit === undefined ? 1 : num(o.usageLimit, 'usageLimit');
      const discountLimit = o.discountLimit === undefined ? 0 : num(o.discountLimit, 'discountLimit');
      const expiryDate = after(env, optString(o, 'expiryDuration'), 'expiryDuration');
      const recipient = profileIdOf(optString(o, 'recipient'), 'recipient') ?? profileOf(env);
      const value = generateCode(ctx, ctx.campaign.couponSettings);
      return {
        effectType: 'couponCreated',
        props: { value, profileId: recipient, usageLimit, discountLimit, ...(expiryDate ? { expiryDate } : {}) },
      };
    },
  },
  createReferral: {
    args: ['options'],
    optional: 1,
    emit: ([opts], env) => {
      const ctx = ctxOf(env, 'createReferral');
      const friend = profileIdOf(optString(options(opts), 'friendProfileIntegrationId'), 'friendProfileIntegrationId');
      return {
        effectType: 'referralCreated',
        props: {
          value: generateCode(ctx, ctx.campaign.referralSettings),
          advocateProfileIntegrationId: profileOf(env),
          ...(friend ? { friendProfileIntegrationId: friend } : {}),
        },
      };
    },
  },
  addLoyaltyPoints: {
    args: ['id', 'number', 'options'],
    optional: 1,
    emit: ([program, points, opts], env) => {
      const ctx = ctxOf(env, 'addLoyaltyPoints');
      const o = options(opts);
      const programId = Number(idOf(program, 'program id'));
      const startDate = after(env, optString(o, 'pendingDuration'), 'pendingDuration') ?? formatTime(parseTime(ctx.input.now)!);
      const expiryDate = after(env, optString(o, 'expiryDuration'), 'expiryDuration') ?? 'unlimited';
      const value = positive(points, 'points');
      const card = loyaltyLedgerOf(env, programId);
      return {
        effectType: 'addLoyaltyPoints',
        props: {
          programId,
          subLedgerId: subledgerOf(o),
          value,
          recipientIntegrationId: profileOf(env),
          transactionUUID: transactionId(ctx),
          startDate,
          expiryDate,
          name: optString(o, 'name') ?? '',
          ...card,
        },
      };
    },
  },
  deductLoyaltyPoints: {
    args: ['id', 'number', 'options'],
    optional: 1,
    emit: ([program, points, opts], env) => {
      const ctx = ctxOf(env, 'deductLoyaltyPoints');
      const o = options(opts);
      const programId = Number(idOf(program, 'program id'));
      const value = positive(points, 'points');
      const card = loyaltyLedgerOf(env, programId);
      return {
        effectType: 'deductLoyaltyPoints',
        props: {
          programId,
          subLedgerId: subledgerOf(o),
          value,
          transactionUUID: transactionId(ctx),
          name: optString(o, 'name') ?? '',
          ...card,
        },
      };
    },
  },
  increaseAchievementProgress: {
    args: ['id', 'number'],
    emit: ([id, delta], env) => {
      const achievementId = idOf(id, 'achievement id');
      const a = ctxOf(env, 'increaseAchievementProgress').input.facts?.achievements?.[achievementId];
      if (!a) throw new EvalError(`unknown achievement ${achievementId}`);
      const d = positive(delta, 'delta');
      if (a.active === false) return undefined;
      const value = a.progress + d;
      return {
        effectType: 'increaseAchievementProgress',
        props: {
          achievementId: Number(achievementId),
          achievementName: a.name,
          delta: d,
          value,
          target: a.target,
          isJustCompleted: a.progress < a.target && value >= a.target,
        },
      };
    },
  },
  showNotification: {
    args: ['string', 'string', 'string'],
    emit: ([type, title, body]) => ({
      effectType: 'showNotification',
      props: { notificationType: str(type, 'type'), title: str(title, 'title'), body: str(body, 'body') },
    }),
  },
  triggerWebhook: {
    args: ['id', 'options'],
    optional: 1,
    emit: ([id, params], env) => {
      const webhookId = idOf(id, 'webhook id');
      const w = ctxOf(env, 'triggerWebhook').input.facts?.webhooks?.[webhookId];
      if (!w) throw new EvalError(`unknown webhook ${webhookId}`);
      return { effectType: 'triggerWebhook', props: { webhookId: Number(webhookId), webhookName: w.name, params: options(params) } };
    },
  },
  updateAttribute: {
    args: ['string', 'any'],
    emit: ([path, value]) => {
      const p = str(path, 'path');
      if (!ATTRIBUTE_PATH.test(p)) throw new EvalError(`updateAttribute takes Session.Attributes.<name> or Profile.Attributes.<name>, got ${JSON.stringify(p)}`);
      return { effectType: 'updateAttribute', props: { path: p, value } };
    },
  },
  addToAudience: audience('addToAudience'),
  removeFromAudience: audience('removeFromAudience'),
  customEffect: {
    args: ['string', 'any'],
    emit: ([name, payload]) => ({ effectType: 'customEffect', props: { name: str(name, 'name'), payload } }),
  },
  noop: { args: [], emit: () => undefined },
};

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

export function compileEffect(node: unknown, pointer: string, scope: Scope): CompiledEffect {
  const fail = (p: string, message: string): CompiledEffect => {
    scope.issues.push({ message, pointer: p, ...(scope.ruleIndex !== undefined ? { ruleIndex: scope.ruleIndex } : {}) });
    return () => {
      throw new EvalError(`not compiled: ${message}`);
    };
  };
  if (!Array.isArray(node) || typeof node[0] !== 'string') return fail(pointer, 'an effect is a call ["effectName", ...]');
  const name = node[0];
  const args = node.slice(1);
  if (name === 'forEach') {
    if (args.length !== 2) return fail(pointer, `forEach takes 2 arguments, got ${args.length}`);
    const listFn = compileExpr(args[0], `${pointer}/1`, scope);
    const blockNode = args[1];
    if (!Array.isArray(blockNode) || !Array.isArray(blockNode[0]) || blockNode.length !== 2) return fail(`${pointer}/2`, 'forEach takes a block [["param"], effect]');
    const params = blockNode[0] as unknown[];
    if (params.length !== 1 || typeof params[0] !== 'string') return fail(`${pointer}/2/0`, `this block takes exactly 1 parameter, got ${params.length}`);
    const param = params[0];
    const inner = compileEffect(blockNode[1], `${pointer}/2/1`, { ...scope, locals: [...scope.locals, param] });
    return (env, out) => {
      const xs = listFn(env);
      if (!Array.isArray(xs)) throw new EvalError(`forEach expects a list, got ${typeName(xs)}`);
      const run = startBlock({ param, body: (e) => (inner(e, out), undefined) }, env);
      for (const x of xs) applyTo(run, x);
    };
  }
  const def = Object.hasOwn(effects, name) ? effects[name] : undefined;
  if (!def) return fail(pointer, `unknown effect ${JSON.stringify(name)}`);
  const max = def.args.length;
  const min = max - (def.optional ?? 0);
  if (args.length < min || args.length > max) {
    return fail(pointer, `${name} takes ${min === max ? min : `${min} to ${max}`} argument${max === 1 ? '' : 's'}, got ${args.length}`);
  }
  let ok = true;
  const compiled: Fn[] = args.map((arg, i) => {
    const kind = def.args[i]!;
    const p = `${pointer}/${i + 1}`;
    if (kind === 'options' && !isRecord(arg)) {
      ok = false;
      scope.issues.push({ message: `${name}: expected an option map {...}, got ${typeName(arg)}`, pointer: p, ...(scope.ruleIndex !== undefined ? { ruleIndex: scope.ruleIndex } : {}) });
      return () => undefined;
    }
    if ((kind === 'any' || kind === 'options') && isRecord(arg) && i === args.length - 1) {
      // An option map: its values are expressions.
      const entries = Object.entries(arg).map(([k, v]) => [k, compileExpr(v, `${p}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`, scope)] as const);
      return (env: Env) => Object.fromEntries(entries.map(([k, f]) => [k, f(env)]));
    }
    if (!Array.isArray(arg) && arg !== null && typeof arg !== 'object') {
      const badPath = name === 'updateAttribute' && i === 0 && typeof arg === 'string' && !ATTRIBUTE_PATH.test(arg);
      const wrong =
        badPath ||
        (kind === 'string' && typeof arg !== 'string') ||
        (kind === 'number' && typeof arg !== 'number') ||
        (kind === 'id' && typeof arg !== 'number' && typeof arg !== 'string');
      if (wrong) {
        ok = false;
        const what = badPath ? 'Session.Attributes.<name> or Profile.Attributes.<name>' : `a ${kind}`;
        scope.issues.push({ message: `${name}: expected ${what}, got ${JSON.stringify(arg)}`, pointer: p, ...(scope.ruleIndex !== undefined ? { ruleIndex: scope.ruleIndex } : {}) });
      }
    }
    return compileExpr(arg, p, scope);
  });
  if (!ok) return () => { throw new EvalError(`not compiled: ${name}`); };
  return (env, out) => {
    const effect = def.emit(compiled.map((f) => f(env)), env);
    if (effect) out.push(effect);
  };
}
