// Loads the TypeScript worker when the service runs from source (tests, `npm run dev`); the built
// service uses the compiled worker.js instead.
import { register } from 'tsx/esm/api';

register();
const mod = await import('./worker.ts');
export default mod.default;
