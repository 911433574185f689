// Copies the files the compiled service reads at run time next to the compiled code:
// SQL migrations and the OpenAPI documents (request validation is built from them).
import { cpSync, mkdirSync, readdirSync, rmSync } from 'node:fs';

// Anew each time: a migration left from another checkout must not be applied.
rmSync('dist/services/store/migrations', { recursive: true, force: true });
mkdirSync('dist/services/store/migrations', { recursive: true });
cpSync('services/store/migrations', 'dist/services/store/migrations', { recursive: true });
mkdirSync('dist/openapi', { recursive: true });
for (const f of readdirSync('openapi')) if (f.endsWith('.yaml')) cpSync(`openapi/${f}`, `dist/openapi/${f}`);
