import { headers } from '@nats-io/nats-core';
import { v4 as uuidv4 } from 'uuid';
import { generateApiKey } from '../../src/auth/api-key.ts';
import { EVENT_TYPE_HEADER, EVENT_VERSION_HEADER } from '../../src/event-store/event-store.ts';
import type { EventEnvelope, UnsealedEvent } from '../../src/events/envelope.ts';
import { sealEvent } from '../../src/events/event-hash.ts';
import type { EventSigner } from '../../src/events/signing/event-signer.ts';
import type { Infrastructure } from '../../src/runtime/infrastructure.ts';

export interface ForgedKey {
  readonly seq: number;
  readonly subject: string;
  readonly keyId: string;
  /** The bearer token the forger would use. */
  readonly key: string;
  readonly event: EventEnvelope;
}

/**
 * What an attacker with publish rights on the event subjects can do: a schema-valid,
 * correctly hash-chained `ApiKeyIssued` with scope admin, published straight to a new key
 * subject of `workspaceId` (bypassing the service). Unsigned unless the attacker brings a
 * signer of their own.
 */
export async function forgeAdminKey(infra: Infrastructure, workspaceId: string, attackerSigner?: EventSigner): Promise<ForgedKey> {
  const generated = generateApiKey();
  const unsealed: UnsealedEvent = {
    id: uuidv4(),
    type: 'ApiKeyIssued',
    version: 1,
    time: new Date().toISOString(),
    workspace_id: workspaceId,
    account_id: null,
    aggregate: { type: 'key', id: generated.keyId },
    actor: { kind: 'operator', id: 'cli' },
    correlation_id: generated.keyId,
    data: { name: 'forged', scope: 'admin', secret_hash: generated.secretHash },
  };
  const subject = infra.subjects.forAggregate({ workspaceId, accountId: null, aggregate: unsealed.aggregate });
  const position = await infra.store.positionOf(subject);
  const event = sealEvent(unsealed, position.lastHash, attackerSigner);
  const h = headers();
  h.set(EVENT_TYPE_HEADER, event.type);
  h.set(EVENT_VERSION_HEADER, '1');
  const ack = await infra.js.publish(subject, JSON.stringify(event), { headers: h, msgID: event.id });
  return { seq: ack.seq, subject, keyId: generated.keyId, key: generated.key, event };
}
