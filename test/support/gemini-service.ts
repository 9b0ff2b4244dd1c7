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
