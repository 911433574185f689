// The REST edge: an express app built from the OpenAPI documents (auth, validation, routes),
// with health, readiness and Prometheus metrics, and the one mapping of errors to HTTP.
export { createEdgeApp, type EdgeOptions, type Readiness, type RouteHandler, type RouteInput, type RouteOutput } from './app.js';
export { createMetrics, type EdgeMetrics, type GaugeSources } from './metrics.js';
export { loadOperations, type Operation } from './openapi.js';
export { RateLimiter, rateLimited, type RateLimitOptions } from './rate-limit.js';
export { verifyContentSignature } from './content-signature.js';
