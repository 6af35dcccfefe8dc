import { fileURLToPath } from 'node:url';

/** The project's root directory (one module, so that options.ts and runner.ts need not import each other). */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
