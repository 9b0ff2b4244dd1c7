import { expect } from 'chai';
import { startTestServer } from './http-test-app.ts';

describe('http server graceful stop', () => {
  it('lets an in-flight request finish, then refuses new connections', async () => {
    const server = await startTestServer();
    // Warm a keep-alive connection so stop() also has an idle socket to close.
    await (await fetch(`${server.url}/healthz`)).body?.cancel();

    const slow = fetch(`${server.url}/slow`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = Date.now();
    const stopped = server.stop(5000);

    const response = await slow;
    expect(response.status).to.equal(200);
    expect(await response.json()).to.deep.equal({ slow: true });
    await stopped;
    expect(Date.now() - started).to.be.below(2000); // did not wait for the grace period

    let refused: unknown;
    try {
      await fetch(`${server.url}/healthz`);
    } catch (error) {
      refused = error;
    }
    expect(refused, 'new request after stop').to.be.instanceOf(Error);
    expect(String((refused as Error & { cause?: { code?: string } }).cause?.code)).to.equal('ECONNREFUSED');
  });

  it('destroys requests still running when the grace period ends', async () => {
    const server = await startTestServer();
    const slow = fetch(`${server.url}/slow`).then(
      (response) => response.status,
      (error: unknown) => error,
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    const started = Date.now();
    await server.stop(50);
    expect(Date.now() - started).to.be.below(250);
    expect(await slow).to.be.instanceOf(Error);
  });

  it('stop is idempotent', async () => {
    const server = await startTestServer();
    const first = server.stop(100);
    expect(server.stop(100)).to.equal(first);
    await first;
  });
});
