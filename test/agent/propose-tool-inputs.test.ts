import { expect } from 'chai';
import { ToolRegistry } from '../../src/agent/tools/tool-registry.ts';

/**
 * What the model may send a propose tool. Amounts that would round to 0 (a budget or target CPA
 * under a cent, a target ROAS under a tenth of a percent) are refused to the model by field,
 * as the target endpoint refuses them: proposed, they became blocked actions "from 174 to 0"
 * that stayed in the history for good.
 */
describe('propose tools: the smallest amounts they take', () => {
  const tools = ToolRegistry.forScope('write');

  for (const [tool, field, tooSmall, smallest] of [
    ['set_campaign_budget', 'daily_budget', 0.001, 0.01],
    ['set_target_cpa', 'target_cpa', 0.004, 0.01],
    ['set_target_roas', 'target_roas_pct', 0.01, 0.1],
  ] as const) {
    it(`given ${tool} with ${field} ${tooSmall}, then the model is told it must be at least ${smallest}; ${smallest} is taken`, () => {
      expect(tools.validate(tool, { campaign_id: 'c1', [field]: tooSmall })).to.equal(`/${field} must be >= ${smallest}`);
      expect(tools.validate(tool, { campaign_id: 'c1', [field]: smallest })).to.equal(null);
    });
  }
});
