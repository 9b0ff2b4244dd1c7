import { expect } from 'chai';
import type { FakeGeminiServer, FakeStep } from '../support/fake-gemini/fake-gemini-server.ts';
import { geminiServiceForDescribe } from '../support/gemini-service.ts';
import { startRun, waitForTerminalRun } from '../support/runs.ts';
import type { TestService, TestTenant } from '../support/test-service.ts';

/** A 200 answer of one candidate with exactly these parts, finish reason and token counts. */
const candidate = (parts: unknown[], finishReason = 'STOP', usageMetadata: Record<string, unknown> = { promptTokenCount: 12, candidatesTokenCount: 4 }): FakeStep => ({
  body: { candidates: [{ content: { role: 'model', parts }, finishReason, index: 0 }], usageMetadata },
});

describe('Gemini answers a run cannot simply use (the real SDK against the scripted server)', function () {
  this.timeout(60_000);
  const setup = geminiServiceForDescribe('geminianswers', { GEMINI_MODEL: 'gemini-test', RUN_TIMEOUT_MS: '8000' });
  let svc: TestService;
  let tenant: TestTenant;
  let gemini: FakeGeminiServer;
  beforeEach(() => ({ svc, tenant, gemini } = setup.service));

  async function runWith(steps: readonly FakeStep[], brief = 'How is my account?'): Promise<any> {
    gemini.script(steps);
    return waitForTerminalRun(svc, tenant.keys.write, await startRun(svc, tenant.keys.write, tenant.accounts.sandbox, brief));
  }

  async function firstCampaignId(): Promise<string> {
    const listed = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/campaigns`, { key: tenant.keys.read })).json()) as { data: { id: string; status: string }[] };
    return listed.data.find((c) => c.status === 'enabled')!.id;
  }

  /** What the run told the model its tool call returned (the functionResponse of the second request). */
  function toolResponseSent(): Record<string, unknown> {
    const contents = gemini.requests[1]!.contents as { role: string; parts: { functionResponse?: { response: Record<string, unknown> } }[] }[];
    return contents.find((c) => c.role === 'function')!.parts[0]!.functionResponse!.response;
  }

  it('given Gemini 3 signs its function call, when the run calls the tool, then the call goes back signed and the run succeeds', async () => {
    const run = await runWith([{ functionCalls: [{ name: 'list_campaigns', args: {}, thoughtSignature: 'c2lnbmF0dXJl' }] }, { text: 'Five campaigns.' }]);
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    expect(run.result.text).to.equal('Five campaigns.');
    expect(gemini.requests[1]!.contents[1]).to.deep.equal({ role: 'model', parts: [{ functionCall: { name: 'list_campaigns', args: {} }, thoughtSignature: 'c2lnbmF0dXJl' }] });
  });

  describe('a malformed function call ends the run agent_error, with the tokens it cost', () => {
    const rows: [string, unknown][] = [
      ['an empty name', { name: '', args: {} }],
      ['a name that is not a string', { name: 7, args: {} }],
      ['arguments as a string', { name: 'list_campaigns', args: '{"a":1}' }],
      ['arguments as an array', { name: 'list_campaigns', args: [1, 2] }],
    ];
    for (const [label, functionCall] of rows) {
      it(`given a call with ${label}, then the run fails agent_error and reports its usage`, async () => {
        const run = await runWith([candidate([{ functionCall }]), { text: 'never asked' }]);
        expect(run.status).to.equal('failed');
        expect(run.error.code).to.equal('agent_error');
        expect(run.error.message).to.include('malformed function call');
        expect(run.result.usage).to.deep.equal({ input_tokens: 12, output_tokens: 4, steps: 1 });
        expect(run.result.tool_calls).to.deep.equal([]);
      });
    }
  });

  it('given a 1.2 MB argument, when the tool runs, then its ToolCalled keeps the input cut and the run succeeds', async () => {
    const run = await runWith([candidate([{ functionCall: { name: 'list_campaigns', args: { junk: 'x'.repeat(1_200_000) } } }]), { text: 'ok' }]);
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    expect(run.result.tool_calls).to.have.length(1);
    const [call] = run.result.tool_calls;
    expect(call.ok).to.equal(true);
    expect(call.input.original_chars).to.be.above(1_200_000);
    expect(call.input.truncated_input).to.have.length(20_000);
  });

  it('given a budget the model wrote as 1e400 (Infinity once parsed), then the model is told it must be finite and nothing is proposed', async () => {
    const campaignId = await firstCampaignId();
    const run = await runWith(
      [
        { raw: `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"set_campaign_budget","args":{"campaign_id":"${campaignId}","daily_budget":1e400}}}]},"finishReason":"STOP"}]}` },
        { text: 'I could not set it.' },
      ],
      'Raise a budget',
    );
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    expect(run.result.actions).to.deep.equal([]);
    expect(run.result.tool_calls).to.deep.equal([{ name: 'set_campaign_budget', input: { campaign_id: campaignId, daily_budget: null }, ok: false }]);
    expect(toolResponseSent()).to.deep.equal({ error: 'invalid input: /daily_budget must be a finite number' });
  });

  it('given a proposal refused for its reason, then the model is told which field is wrong and why', async () => {
    const campaignId = await firstCampaignId();
    const run = await runWith(
      [{ functionCalls: [{ name: 'add_negative_keywords', args: { campaign_id: campaignId, keywords: [{ text: 'zzqx free' }], reason: 'r'.repeat(2001) } }] }, { text: 'ok' }],
      'Add negatives',
    );
    expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
    expect(run.result.actions).to.deep.equal([]);
    const { error } = toolResponseSent() as { error: string };
    expect(error).to.include('The proposal cannot be recorded as it is.').and.include('/reason').and.include('2000');
  });

  describe('finish reasons', () => {
    it('given MAX_TOKENS after part of the answer, then the run succeeds with that text marked truncated', async () => {
      const run = await runWith([{ text: 'Your three worst campaigns are: 1.', finishReason: 'MAX_TOKENS' }]);
      expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
      expect(run.result.text).to.equal('Your three worst campaigns are: 1.');
      expect(run.result.truncated).to.equal(true);
    });

    it('given MAX_TOKENS before any answer (thinking used the budget), then the run fails agent_error and reports the tokens', async () => {
      const run = await runWith([{ body: { candidates: [{ finishReason: 'MAX_TOKENS', index: 0 }], usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 0, thoughtsTokenCount: 8000 } } }]);
      expect(run.status).to.equal('failed');
      expect(run.error.code).to.equal('agent_error');
      expect(run.error.message).to.include('output-token limit');
      expect(run.result.usage).to.deep.equal({ input_tokens: 10, output_tokens: 8000, steps: 1 });
    });

    it('given UNEXPECTED_TOOL_CALL once tool calls are used up, then the run fails agent_error saying so', async () => {
      const fiveCalls = { functionCalls: Array.from({ length: 5 }, () => ({ name: 'get_account_summary', args: {} })) };
      const run = await runWith([fiveCalls, fiveCalls, candidate([], 'UNEXPECTED_TOOL_CALL')]);
      expect(run.status).to.equal('failed');
      expect(run.error.code).to.equal('agent_error');
      expect(run.error.message).to.include('UNEXPECTED_TOOL_CALL');
      expect(run.result.tool_calls).to.have.length(10);
    });

    it('given OTHER with no content, then the run fails agent_error saying so', async () => {
      const run = await runWith([candidate([], 'OTHER')]);
      expect(run.status).to.equal('failed');
      expect(run.error.code).to.equal('agent_error');
      expect(run.error.message).to.include('finish reason OTHER');
    });
  });

  describe('usage', () => {
    it('counts thinking tokens as output tokens, as Gemini bills them', async () => {
      const run = await runWith([{ text: 'hi', usage: { input: 10, output: 2, thoughts: 5000 } }]);
      expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
      expect(run.result.usage).to.deep.equal({ input_tokens: 10, output_tokens: 5002, steps: 1 });
    });

    it('given a token count that is not a number, then it counts 0 and the run still ends', async () => {
      const run = await runWith([candidate([{ text: 'hi' }], 'STOP', { promptTokenCount: '10', candidatesTokenCount: 2 })]);
      expect(run.status, JSON.stringify(run.error)).to.equal('succeeded');
      expect(run.result.usage).to.deep.equal({ input_tokens: 0, output_tokens: 2, steps: 1 });
    });
  });
});
