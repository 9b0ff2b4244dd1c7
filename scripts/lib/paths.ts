import { fileURLToPath } from 'node:url';

/** The repository root, whatever the working directory. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
