import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import type { HttpServer } from '../../src/http/http-server.ts';
import { PROBLEM_CATALOGUE, PROBLEM_SLUGS } from '../../src/http/problems/problem-catalogue.ts';
import { PUBLIC_BASE_URL, startTestServer } from '../http/http-test-app.ts';
import { expectProblemResponse } from '../support/problem.ts';

/** The path of a problem type URI, fetched from the test server instead of PUBLIC_BASE_URL. */
function pageUrl(server: HttpServer, typeUri: string): string {
  expect(typeUri.startsWith(`${PUBLIC_BASE_URL}/problems/`), typeUri).to.equal(true);
  return `${server.url}${new URL(typeUri).pathname}`;
}

describe('problem type pages (issue #15 item 2)', () => {
  let server: HttpServer;
  before(async () => {
    server = await startTestServer();
  });
  after(async () => {
    await server.stop(1000);
  });

  it('GET of every problem type URI answers a page', async () => {
    for (const slug of PROBLEM_SLUGS) {
      const entry = PROBLEM_CATALOGUE[slug];
      const response = await fetch(pageUrl(server, `${PUBLIC_BASE_URL}/problems/${slug}`));
      expect(response.status, slug).to.equal(200);
      expect(response.headers.get('content-type'), slug).to.match(/^text\/html/);
      const html = await response.text();
      expect(html, slug).to.include(`<h1>${entry.title.replaceAll("'", '&#39;')}</h1>`);
      expect(html, slug).to.include('When it happens').and.include('How to fix it').and.include('Example');
      expect(html, slug).to.include(`HTTP ${entry.status}`);
    }
  });

  it('answers the page as JSON to a client that asks for it, with an example body of that type', async () => {
    const response = await fetch(`${server.url}/problems/run-in-progress`, { headers: { accept: 'application/json' } });
    expect(response.status).to.equal(200);
    const page = (await response.json()) as Record<string, any>;
    expect(page).to.include({ slug: 'run-in-progress', status: 409, title: PROBLEM_CATALOGUE['run-in-progress'].title });
    expect(page.when).to.be.a('string').that.is.not.empty;
    expect(page.fix).to.be.a('string').that.is.not.empty;
    expect(page.example).to.include({ type: `${PUBLIC_BASE_URL}/problems/run-in-progress`, status: 409 });
    expect(page.example.active_run_id).to.be.a('string');
  });

  it('the type URI of a problem the server just answered resolves, including a bare status', async () => {
    const notFound = await expectProblemResponse(await fetch(`${server.url}/no-such-thing`), 404, 'not-found');
    expect((await fetch(pageUrl(server, notFound.type as string))).status).to.equal(200);
    const teapot = await expectProblemResponse(await fetch(`${server.url}/teapot`), 418, 'http-418');
    const page = await fetch(pageUrl(server, teapot.type as string));
    expect(page.status).to.equal(200);
    expect(await page.text()).to.include("I&#39;m a Teapot");
  });

  it('an unknown problem slug is a 404 problem, and the page escapes nothing from the request', async () => {
    await expectProblemResponse(await fetch(`${server.url}/problems/%3Cscript%3E`), 404, 'not-found');
    await expectProblemResponse(await fetch(`${server.url}/problems/http-999`), 404, 'not-found');
  });

  it('docs/api.md lists exactly the catalogue, with its statuses and titles', async () => {
    const doc = await readFile(new URL('../../docs/api.md', import.meta.url), 'utf8');
    const section = doc.slice(doc.indexOf('### Problem types'));
    const rows = [...section.matchAll(/^\| `([a-z0-9-]+)` \| (\d{3}) \| (.+) \|$/gm)].map((m) => [m[1], Number(m[2]), m[3]]);
    expect(rows).to.deep.equal(PROBLEM_SLUGS.map((slug) => [slug, PROBLEM_CATALOGUE[slug].status, PROBLEM_CATALOGUE[slug].title]));
  });
});
