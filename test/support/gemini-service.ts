import { FAKE_GEMINI_API_KEY, FakeGeminiServer } from './fake-gemini/fake-gemini-server.ts';
import { startTestService, type TestService, type TestTenant } from './test-service.ts';

export interface GeminiTestService {
  readonly svc: TestService;
  readonly tenant: TestTenant;
  /** The scripted Gemini the service's agent talks to, through the real SDK. */
  readonly gemini: FakeGeminiServer;
  stop(): Promise<void>;
}

/** A test service whose agent is Gemini (the real SDK) against a local scripted Gemini server. */
export async function startGeminiTestService(label: string, env: Record<string, string> = {}): Promise<GeminiTestService> {
  const gemini = new FakeGeminiServer();
  const started = await gemini.start();
  const svc = await startTestService(label, { GEMINI_API_KEY: FAKE_GEMINI_API_KEY, GEMINI_BASE_URL: started.baseUrl, ...env }).catch(async (error) => {
    await started.close();
    throw error;
  });
  return {
    svc,
    tenant: await svc.tenant(),
    gemini,
    stop: async () => {
      await svc.stop();
      await started.close();
    },
  };
}

/**
 * A {@link startGeminiTestService} for the calling `describe`: started before its tests, stopped
 * after them, the scripted server's recorded requests emptied before each test. Read it inside
 * the tests (the getter throws before `before` ran).
 *
 * @example
 * const gemini = geminiServiceForDescribe('runlimits', { RUN_TIMEOUT_MS: '4000' });
 * it('…', async () => { gemini.service.gemini.script([...]); await startRun(gemini.service.svc, …); });
 */
export function geminiServiceForDescribe(label: string, env: Record<string, string> = {}): { readonly service: GeminiTestService } {
  let setup: GeminiTestService | undefined;
  before(async () => {
    setup = await startGeminiTestService(label, env);
  });
  after(async () => setup?.stop());
  beforeEach(() => setup?.gemini.requests.splice(0));
  return {
    get service(): GeminiTestService {
      if (!setup) throw new Error('geminiServiceForDescribe: read outside a test of its describe');
      return setup;
    },
  };
}
