import type { ModelClient } from '../../src/agent/model/model-port.ts';
import { RulesModel } from '../../src/agent/model/rules/rules-model.ts';
import { createLogger } from '../../src/log/logger.ts';
import { createPlatform } from '../../src/platform/create-platform.ts';
import { ProposalService } from '../../src/policy/proposal-service.ts';
import { AgentWorker } from '../../src/workers/agent-worker.ts';
import type { TestService } from './test-service.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';

/**
 * An agent worker in this process on a test service's stream, for tests that start the
 * service without the agent-worker role and add a worker at a moment of their choosing.
 */
export async function startAgentWorker(svc: TestService, options: { model?: ModelClient; ackWaitMs?: number } = {}): Promise<AgentWorker> {
  const infra = svc.service.infrastructure;
  const worker = new AgentWorker({
    infrastructure: infra,
    executor: {
      platform: createPlatform(infra.database.db),
      proposals: new ProposalService(infra.commands, new ApprovalsAppliedChangeLookup(infra.database.db)),
      model: options.model ?? new RulesModel(),
      wallClockMs: 20_000,
      modelBudgetMs: 20_000,
    },
    concurrency: 1,
    logger: createLogger('silent'),
    shutdownGraceMs: 1000,
    ackWaitMs: options.ackWaitMs ?? 5000,
  });
  await worker.start();
  return worker;
}
