import { STATUS_CODES } from 'node:http';
import { Router } from '@koa/router';
import { problemTypeUri } from '../problem-response.ts';
import { isProblemSlug, PROBLEM_CATALOGUE, type ProblemTypeEntry } from './problem-catalogue.ts';

/** A bare status the router or raw-body raised, with no entry of its own (`http-418`). */
const BARE_STATUS = /^http-([45][0-9]{2})$/;

/** The catalogue entry of `slug`, or a generic one for `http-<status>`; null for anything else. */
export function problemPageEntry(slug: string): ProblemTypeEntry | null {
  if (isProblemSlug(slug)) return PROBLEM_CATALOGUE[slug];
  const bare = BARE_STATUS.exec(slug);
  const reason = bare ? STATUS_CODES[Number(bare[1])] : undefined;
  if (!bare || reason === undefined) return null;
  return {
    title: reason,
    status: Number(bare[1]),
    when: `The server answered HTTP ${bare[1]} (${reason}) for a reason that has no more specific problem type.`,
    fix: 'Read `detail`; if it does not help, check the request against the OpenAPI document at /api/v1/openapi.json.',
    example: { detail: reason },
  };
}

/** The example body a client would receive, with every member a problem has. */
export function exampleProblem(publicBaseUrl: string, slug: string, entry: ProblemTypeEntry): Record<string, unknown> {
  return {
    type: problemTypeUri(publicBaseUrl, slug),
    title: entry.title,
    status: entry.status,
    instance: '/api/v1/…',
    request_id: '0190a6c2-0000-7000-8000-00000000abcd',
    ...entry.example,
  };
}

const HTML_ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

/** Backticks in the catalogue's sentences become <code>. */
function prose(text: string): string {
  return escapeHtml(text).replace(/`([^`]+)`/g, '<code>$1</code>');
}

function problemPageHtml(slug: string, entry: ProblemTypeEntry, example: Record<string, unknown>): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(entry.title)} (${entry.status})</title></head>
<body>
<h1>${escapeHtml(entry.title)}</h1>
<p>Problem type <code>${escapeHtml(slug)}</code>, HTTP ${entry.status}.</p>
<h2>When it happens</h2><p>${prose(entry.when)}</p>
<h2>How to fix it</h2><p>${prose(entry.fix)}</p>
<h2>Example</h2><pre>${escapeHtml(JSON.stringify(example, null, 2))}</pre>
</body></html>
`;
}

/**
 * `GET /problems/<slug>`: every problem `type` URI the API answers with resolves to a short
 * page (HTML, or JSON when the client prefers `application/json`) made from the catalogue.
 * An unknown slug falls through to the 404 problem.
 */
export function problemPagesRouter(publicBaseUrl: string): Router {
  const router = new Router({ sensitive: true });
  router.get('/problems/:slug', (ctx, next) => {
    const slug = ctx.params.slug ?? '';
    const entry = problemPageEntry(slug);
    if (entry === null) return next();
    const example = exampleProblem(publicBaseUrl, slug, entry);
    ctx.set('Cache-Control', 'public, max-age=3600');
    if (ctx.accepts('html', 'json') === 'json') {
      ctx.body = { slug, type: problemTypeUri(publicBaseUrl, slug), title: entry.title, status: entry.status, when: entry.when, fix: entry.fix, example };
      return undefined;
    }
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = problemPageHtml(slug, entry, example);
    return undefined;
  });
  return router;
}
