import { InMemoryEventStore } from '../../src/event-store/in-memory-event-store.ts';
import { Subjects } from '../../src/event-store/subjects.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';
import { eventStoreContract } from './event-store-contract.ts';

const subjectsOf = (subjects: Subjects) => (workspaceId: string) =>
  subjects.forAggregate({ workspaceId, accountId: null, aggregate: { type: 'workspace', id: workspaceId } });

describe('event store contract: in-memory', () => {
  eventStoreContract(async () => {
    const store = new InMemoryEventStore();
    return { store, subjectOf: subjectsOf(new Subjects('mem')), publishRaw: async (subject, data) => store.appendRaw(subject, data) };
  });
});

describe('event store contract: JetStream (real NATS)', () => {
  const config = isolatedConfig('contract');
  let infra: Infrastructure | undefined;
  eventStoreContract(
    async () => {
      infra = await openInfrastructure(config, 'test-contract');
      const { js, store, subjects } = infra;
      return { store, subjectOf: subjectsOf(subjects), publishRaw: async (subject, data) => (await js.publish(subject, data)).seq };
    },
    async () => {
      await infra?.close();
      await dropIsolated(config);
    },
  );
});
