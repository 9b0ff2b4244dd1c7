import type { Config } from '../../src/config/config.ts';
import { createLogger } from '../../src/log/logger.ts';
import { createAccount, createWorkspace, issueKey } from '../../src/operator/operator-commands.ts';
import { startService, type RunningService } from '../../src/runtime/service.ts';
import { dropIsolated, isolatedConfig } from './isolation.ts';

export interface TestTenant {
  readonly workspaceId: string;
  readonly accounts: { readonly sandbox: string; readonly sandbox2: string; readonly disconnected: string };
  readonly keys: { readonly read: string; readonly write: string; readonly admin: string };
  readonly keyIds: { readonly read: string; readonly write: string; readonly admin: string };
}

export interface TestService {
  readonly config: Config;
  readonly service: RunningService;
  readonly baseUrl: string;
  /** Sends a request to the service; `key` becomes the bearer token. */
  request(method: string, path: string, options?: { key?: string; body?: unknown; headers?: Record<string, string> }): Promise<Response>;
  tenant(name?: string): Promise<TestTenant>;
  stop(): Promise<void>;
}

/** Starts every role in-process on an isolated stream and schema. */
export async function startTestService(label: string, overrides: Record<string, string> = {}): Promise<TestService> {
  const config = isolatedConfig(label, overrides);
  const service = await startService(config, createLogger(config.logLevel));
  const baseUrl = service.http?.url ?? '';
  const infra = service.infrastructure;
  let stopped = false;
  return {
    config,
    service,
    baseUrl,
    request: (method, path, options = {}) => {
      const headers: Record<string, string> = { ...options.headers };
      if (options.key) headers.authorization = `Bearer ${options.key}`;
      let body: string | undefined;
      if (options.body !== undefined) {
        body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
        headers['content-type'] ??= 'application/json';
      }
      return fetch(`${baseUrl}${path}`, { method, headers, body });
    },
    tenant: async (name = 'tenant') => {
      const ws = (await createWorkspace(infra, name)).value.id;
      const [sandbox, sandbox2, disconnected] = await Promise.all([
        createAccount(infra, ws, `${name} sandbox`, 'sandbox'),
        createAccount(infra, ws, `${name} sandbox 2`, 'sandbox'),
        createAccount(infra, ws, `${name} offline`, 'none'),
      ]);
      const [read, write, admin] = await Promise.all([
        issueKey(infra, ws, 'read', 'read'),
        issueKey(infra, ws, 'write', 'write'),
        issueKey(infra, ws, 'admin', 'admin'),
      ]);
      return {
        workspaceId: ws,
        accounts: { sandbox: sandbox.value.id, sandbox2: sandbox2.value.id, disconnected: disconnected.value.id },
        keys: { read: read.value.key, write: write.value.key, admin: admin.value.key },
        keyIds: { read: read.value.id, write: write.value.id, admin: admin.value.id },
      };
    },
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await service.stop();
      await dropIsolated(config);
    },
  };
}
