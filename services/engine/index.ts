// The rule engine: the rule language of rules.md compiled once to closures (compile errors carry
// the rule index and JSON pointer of the bad node), campaign evaluation with stacking and money
// exact to the minor unit, and an evaluator that runs inline or in a Piscina worker pool. Pure:
// a snapshot goes in, effects and failure reasons come out; the integration layer commits them.
export type {
  BindingSpec,
  CodeSettings,
  CouponFact,
  EvaluationFacts,
  LimitFact,
  LoyaltyFact,
  ReferralFact,
  CampaignInput,
  CampaignPriority,
  Effect,
  EvaluationInput,
  EvaluationResult,
  ExclusiveStrategy,
  RuleCompileIssue,
  RuleFailureReason,
  RuleSpec,
  RulesetSpec,
} from './types.js';
export { EvalError, RuleCompileError } from './types.js';
export { checkRuleset, compileExpression, compileRuleset, readsProfile, readsFirstSession, BUILTIN_ROOTS, type CompiledRuleset } from './compile.js';
export { evaluate, estimateCost } from './evaluate.js';
export { createEvaluator, type Evaluator, type EvaluatorOptions } from './pool.js';
export { currencyDigits, splitLargestRemainder, toMinor, fromMinor } from './money.js';
export { operators } from './operators.js';
export { rollbackEffects } from './rollback.js';
export { CouponReason, ReferralReason } from './redemptions.js';
