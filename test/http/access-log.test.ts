import { Writable } from 'node:stream';
import { expect } from 'chai';
import { pino } from 'pino';
import type { HttpServer } from '../../src/http/http-server.ts';
import { startTestServer } from './http-test-app.ts';

describe('access log', () => {
  const lines: Record<string, unknown>[] = [];
  let server: HttpServer;
  before(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
        callback();
      },
    });
    server = await startTestServer({ logger: pino({ level: 'info' }, sink) });
  });
  after(async () => {
    await server.stop(1000);
  });

  it('writes one line per request without query, headers or body', async () => {
    lines.length = 0;
    const response = await fetch(`${server.url}/echo?token=sekrit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sekrit', 'x-request-id': 'log-test-1' },
      body: JSON.stringify({ password: 'sekrit' }),
    });
    await response.body?.cancel();
    await new Promise((resolve) => setImmediate(resolve));
    const requests = lines.filter((line) => line.msg === 'http request');
    expect(requests).to.have.length(1);
    const [line] = requests;
    expect(line).to.include({ method: 'POST', path: '/echo', status: 200, request_id: 'log-test-1' });
    expect(line?.duration_ms).to.be.a('number');
    expect(JSON.stringify(lines)).not.to.contain('sekrit');
  });

  it('logs unexpected errors with their stack at error level', async () => {
    lines.length = 0;
    await (await fetch(`${server.url}/boom`, { headers: { 'x-request-id': 'log-test-2' } })).body?.cancel();
    await new Promise((resolve) => setImmediate(resolve));
    const errors = lines.filter((line) => line.level === 50);
    expect(errors).to.have.length(1);
    expect(errors[0]).to.include({ request_id: 'log-test-2' });
    expect((errors[0]?.err as { stack?: string }).stack).to.contain('Error: secret database password');
    expect(lines.find((line) => line.msg === 'http request')).to.include({ status: 500 });
  });
});
