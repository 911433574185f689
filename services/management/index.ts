// Management API use cases: log in and tokens, Applications, campaigns, rulesets (compile-checked
// by the engine), Integration API keys and custom attributes, with the account and role checks of every call.
// Each function takes the caller (Principal) and validated input, and returns the JSON to send.
export * from './context.js';
export * from './auth.js';
export * from './api-keys.js';
export * from './applications.js';
export * from './campaigns.js';
export * from './rulesets.js';
export * from './attributes.js';
