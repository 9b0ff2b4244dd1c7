import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

/** Where deploy/build-console.sh writes the built console. */
export const DEFAULT_CONSOLE_DIST = fileURLToPath(new URL('../../../console/dist/', import.meta.url));

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};
/** Text formats worth compressing; images and fonts already are. */
const COMPRESSIBLE = new Set(['.html', '.js', '.mjs', '.css', '.json', '.map', '.svg', '.txt']);
/** Below this, gzip's header costs more than it saves. */
const GZIP_MIN_BYTES = 512;

export interface ConsoleFile {
  /** Path inside dist with forward slashes, e.g. `assets/index-abc123.js`. */
  readonly path: string;
  readonly contentType: string;
  readonly body: Buffer;
  /** Present when gzip makes the file smaller. */
  readonly gzipped: Buffer | undefined;
  /** Strong validator of the identity body (the gzip variant appends `-gz`). */
  readonly etag: string;
  /** Vite puts a content hash in every name under assets/: such a file never changes. */
  readonly immutable: boolean;
}

export interface ConsoleBundle {
  readonly files: ReadonlyMap<string, ConsoleFile>;
  readonly index: ConsoleFile;
  /** mtime of index.html when read; a new build rewrites it. */
  readonly builtAtMs: number;
}

/**
 * Reads every file of the built console into memory, each with its gzip variant, once per
 * build. The set of servable paths is exactly the files found here, so no request path
 * is ever joined onto the file system (no traversal to guard against).
 *
 * @returns undefined when the console has not been built (no index.html).
 * @example
 * const bundle = loadConsoleBundle(DEFAULT_CONSOLE_DIST);
 * bundle?.files.get('index.html')?.contentType; // 'text/html; charset=utf-8'
 */
export function loadConsoleBundle(distDir: string): ConsoleBundle | undefined {
  const builtAtMs = indexMtime(distDir);
  if (builtAtMs === undefined) return undefined;
  const files = new Map<string, ConsoleFile>();
  for (const absolute of listFiles(distDir)) {
    const path = relative(distDir, absolute).split(sep).join('/');
    const extension = extname(path).toLowerCase();
    const body = readFileSync(absolute);
    const compressed = COMPRESSIBLE.has(extension) && body.length >= GZIP_MIN_BYTES ? gzipSync(body, { level: 9 }) : undefined;
    files.set(path, {
      path,
      contentType: CONTENT_TYPES[extension] ?? 'application/octet-stream',
      body,
      gzipped: compressed && compressed.length < body.length ? compressed : undefined,
      etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
      immutable: path.startsWith('assets/'),
    });
  }
  const index = files.get('index.html');
  return index ? { files, index, builtAtMs } : undefined;
}

/** mtime of dist/index.html in ms, or undefined when it is missing. */
export function indexMtime(distDir: string): number | undefined {
  try {
    return statSync(join(distDir, 'index.html')).mtimeMs;
  } catch {
    return undefined;
  }
}

function listFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return listFiles(path);
    return entry.isFile() ? [path] : [];
  });
}
