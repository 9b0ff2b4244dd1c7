import type { Infrastructure } from '../runtime/infrastructure.ts';
import { printResult } from './output.ts';

/**
 * `adsagent keys export-public [--json]`: the public keys this deployment believes, for
 * auditors who verify offline (`audit verify --public-key FILE`). The PEM output, saved to
 * a file, is exactly what --public-key reads.
 */
export async function runKeysExportPublic(infra: Infrastructure, json: boolean): Promise<void> {
  const keys = await infra.signing.describeKeys();
  const pem = keys.map((key) => `# key_id ${key.key_id} (${key.status}${key.activated_at ? `, activated ${key.activated_at}` : ''})\n${key.public_key_pem.trimEnd()}`).join('\n');
  printResult(json, { object: 'list', data: keys }, pem);
}
