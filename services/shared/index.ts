// Shared building blocks every module may use: the error taxonomy, logging, time and ids.
// Nothing here imports another Perkline module.
export * from './errors.js';
export * from './logger.js';
export * from './clock.js';
export * from './ids.js';
export * from './decimal.js';
export * from './config-events.js';
export { mapLimited } from './concurrency.js';
export { GroupCommit, type GroupCommitOptions } from './group-commit.js';
export { jsonValue, parseTemplate, renderTemplate, TemplateError, urlValue, type TemplatePart, type TemplateValues } from './webhook-template.js';
export { DispatchLoop, retryDelay, type DispatchLoopOptions } from './dispatch-loop.js';
