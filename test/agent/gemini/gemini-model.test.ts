import { expect } from 'chai';
import { createModel } from '../../../src/agent/model/create-model.ts';
import { GeminiModel, type GeminiModelOptions } from '../../../src/agent/model/gemini/gemini-model.ts';
import { ModelError, type ConversationEntry, type ModelClient, type ModelPart, type ModelRequest, type ToolDeclaration } from '../../../src/agent/model/model-port.ts';
import type { Config } from '../../../src/config/config.ts';
import { FAKE_GEMINI_API_KEY, FakeGeminiServer, MISSING_THOUGHT_SIGNATURE_MESSAGE } from '../../support/fake-gemini/fake-gemini-server.ts';

const MODEL = 'gemini-test';

const listCampaigns: ToolDeclaration = { name: 'list_campaigns', description: 'Every campaign.', parameters: { type: 'object', properties: {} } };
const pauseCampaign: ToolDeclaration = {
  name: 'pause_campaign',
  description: 'Propose pausing a campaign.',
  parameters: {
    type: 'object',
    required: ['campaign_id'],
    additionalProperties: false,
    properties: {
      campaign_id: { type: 'string', minLength: 1, maxLength: 40, description: 'The campaign.' },
      limit: { type: 'integer', minimum: 1, maximum: 500 },
      keywords: {
        type: 'array',
        minItems: 1,
        items: {
          type: 'object',
          required: ['text'],
          properties: { text: { type: 'string', pattern: '^\\w+$' }, match_type: { type: 'string', enum: ['exact', 'phrase'] } },
        },
      },
      note: { type: ['string', 'null'] },
    },
  },
};

describe('GeminiModel against a fake Gemini server', () => {
  let server: FakeGeminiServer;
  let baseUrl: string;
  let close: () => Promise<void>;

  beforeEach(async () => {
    server = new FakeGeminiServer();
    ({ baseUrl, close } = await server.start());
  });
  afterEach(async () => close());

  const model = (options: Partial<GeminiModelOptions> = {}): GeminiModel =>
    new GeminiModel({ apiKey: FAKE_GEMINI_API_KEY, model: MODEL, baseUrl, retryBaseMs: 5, ...options });

  const request = (overrides: Partial<ModelRequest> = {}): ModelRequest => ({
    system: 'You manage ad accounts.',
    conversation: [{ role: 'user', text: 'How are my campaigns doing?' }],
    tools: [listCampaigns],
    signal: new AbortController().signal,
    ...overrides,
  });

  async function rejection(promise: Promise<unknown>): Promise<unknown> {
    try {
      await promise;
    } catch (error) {
      return error;
    }
    expect.fail('expected a rejection');
  }

  it('returns a text answer with usage mapped', async () => {
    server.script([{ text: 'All fine.', usage: { input: 120, output: 8 } }]);
    const turn = await model().generate(request());
    expect(turn).to.deep.equal({ parts: [{ kind: 'text', text: 'All fine.' }], usage: { input_tokens: 120, output_tokens: 8 } });
    expect(server.models).to.deep.equal([MODEL]);
    expect(server.requests[0]?.contents).to.deep.equal([{ role: 'user', parts: [{ text: 'How are my campaigns doing?' }] }]);
  });

  it('reports zero usage when Gemini sends no usageMetadata', async () => {
    server.script([{ text: 'ok' }]);
    expect((await model().generate(request())).usage).to.deep.equal({ input_tokens: 0, output_tokens: 0 });
  });

  it('has a gemini identity', () => {
    expect(model().identity).to.deep.equal({ kind: 'gemini', model: MODEL });
  });

  it('round-trips a function call: the next request carries the call and our response', async () => {
    server.script([
      { text: 'Let me look.', functionCalls: [{ name: 'list_campaigns' }, { name: 'pause_campaign', args: { campaign_id: 'c1' } }] },
      { text: 'Two campaigns.', usage: { input: 300, output: 5 } },
    ]);
    const gemini = model();
    const first = await gemini.generate(request({ tools: [listCampaigns, pauseCampaign] }));
    expect(first.parts).to.deep.equal([
      { kind: 'text', text: 'Let me look.' },
      { kind: 'function_call', call: { name: 'list_campaigns', args: {} } },
      { kind: 'function_call', call: { name: 'pause_campaign', args: { campaign_id: 'c1' } } },
    ]);

    const conversation: ConversationEntry[] = [
      ...request().conversation,
      { role: 'model', parts: first.parts },
      {
        role: 'tool',
        results: [
          { name: 'list_campaigns', response: { campaigns: [{ id: 'c1' }, { id: 'c2' }] } },
          { name: 'pause_campaign', response: { proposal_id: 'p1' } },
        ],
      },
    ];
    const second = await gemini.generate(request({ conversation, tools: [listCampaigns, pauseCampaign] }));
    expect(second.parts).to.deep.equal([{ kind: 'text', text: 'Two campaigns.' }]);
    expect(server.requests[1]?.contents).to.deep.equal([
      { role: 'user', parts: [{ text: 'How are my campaigns doing?' }] },
      {
        role: 'model',
        parts: [
          { text: 'Let me look.' },
          { functionCall: { name: 'list_campaigns', args: {} } },
          { functionCall: { name: 'pause_campaign', args: { campaign_id: 'c1' } } },
        ],
      },
      {
        role: 'function',
        parts: [
          { functionResponse: { name: 'list_campaigns', response: { campaigns: [{ id: 'c1' }, { id: 'c2' }] } } },
          { functionResponse: { name: 'pause_campaign', response: { proposal_id: 'p1' } } },
        ],
      },
    ]);
  });

  it('sends a function call back with the thought signature Gemini gave it', async () => {
    server.script([{ functionCalls: [{ name: 'list_campaigns', args: {}, thoughtSignature: 'c2lnbmF0dXJl' }] }, { text: 'done' }]);
    const gemini = model();
    const first = await gemini.generate(request());
    await gemini.generate(request({ conversation: [...request().conversation, { role: 'model', parts: first.parts }, { role: 'tool', results: [{ name: 'list_campaigns', response: {} }] }] }));
    const modelContent = server.requests[1]?.contents[1];
    expect(modelContent).to.deep.equal({ role: 'model', parts: [{ functionCall: { name: 'list_campaigns', args: {} }, thoughtSignature: 'c2lnbmF0dXJl' }] });
  });

  describe('the model the service runs (createModel: Gemini wrapped in SanitizingModel)', () => {
    const production = (): ModelClient =>
      createModel({ geminiApiKey: FAKE_GEMINI_API_KEY, geminiModel: MODEL, geminiBaseUrl: baseUrl } as Partial<Config> as Config);
    const afterCall = (parts: readonly ModelPart[]): ConversationEntry[] => [
      ...request().conversation,
      { role: 'model', parts },
      { role: 'tool', results: [{ name: 'list_campaigns', response: {} }] },
    ];

    it('given Gemini signs a function call, when the call goes back on the next turn, then it carries its thought signature and Gemini answers', async () => {
      server.script([{ functionCalls: [{ name: 'list_campaigns', args: {}, thoughtSignature: 'c2lnbmF0dXJl' }] }, { text: 'done' }]);
      const gemini = production();
      const first = await gemini.generate(request());
      const second = await gemini.generate(request({ conversation: afterCall(first.parts) }));
      expect(second.parts).to.deep.equal([{ kind: 'text', text: 'done' }]);
      expect(server.requests[1]?.contents[1]).to.deep.equal({ role: 'model', parts: [{ functionCall: { name: 'list_campaigns', args: {} }, thoughtSignature: 'c2lnbmF0dXJl' }] });
    });

    it('given a signed call, when it comes back without its signature, then the fake answers 400 as Gemini 3 does', async () => {
      server.script([{ functionCalls: [{ name: 'list_campaigns', thoughtSignature: 'c2lnbmF0dXJl' }] }, { text: 'never' }]);
      const gemini = production();
      const first = await gemini.generate(request());
      const unsigned = first.parts.map((part) => (part.kind === 'function_call' ? { kind: part.kind, call: part.call } : part));
      const error = await rejection(gemini.generate(request({ conversation: afterCall(unsigned) })));
      expect(error).to.be.instanceOf(ModelError);
      expect((error as ModelError).status).to.equal(400);
      expect((error as ModelError).message).to.include(MISSING_THOUGHT_SIGNATURE_MESSAGE);
      expect(server.remaining).to.equal(1);
    });

    it('drops a signature that is not a bounded base64 string rather than send it back', async () => {
      server.script([{ functionCalls: [{ name: 'list_campaigns', thoughtSignature: 'not base64\u0000' }] }]);
      const first = await production().generate(request());
      expect(first.parts).to.deep.equal([{ kind: 'function_call', call: { name: 'list_campaigns', args: {} } }]);
    });
  });

  it('declares tools with schemas converted to Gemini\'s subset', async () => {
    server.script([{ text: 'ok' }]);
    await model().generate(request({ tools: [listCampaigns, pauseCampaign] }));
    expect(server.requests[0]?.tools).to.deep.equal([
      {
        functionDeclarations: [
          // No parameters at all: Gemini rejects an OBJECT with empty properties.
          { name: 'list_campaigns', description: 'Every campaign.' },
          {
            name: 'pause_campaign',
            description: 'Propose pausing a campaign.',
            parameters: {
              type: 'object',
              required: ['campaign_id'],
              properties: {
                campaign_id: { type: 'string', description: 'The campaign.' },
                limit: { type: 'integer' },
                keywords: {
                  type: 'array',
                  minItems: 1,
                  items: {
                    type: 'object',
                    required: ['text'],
                    properties: { text: { type: 'string' }, match_type: { type: 'string', format: 'enum', enum: ['exact', 'phrase'] } },
                  },
                },
                note: { type: 'string', nullable: true },
              },
            },
          },
        ],
      },
    ]);
  });


  it('declares a frozen tool list the same on every turn, and a list that changed as it is now', async () => {
    server.script([{ text: 'one' }, { text: 'two' }, { text: 'three' }, { text: 'four' }]);
    const gemini = model();
    const frozen = Object.freeze([listCampaigns, pauseCampaign]);
    await gemini.generate(request({ tools: frozen }));
    await gemini.generate(request({ tools: frozen }));
    expect(server.requests[1]?.tools).to.deep.equal(server.requests[0]?.tools);
    const changing = [listCampaigns];
    await gemini.generate(request({ tools: changing }));
    changing.push(pauseCampaign);
    await gemini.generate(request({ tools: changing }));
    const names = (i: number) => (server.requests[i]?.tools as { functionDeclarations: { name: string }[] }[])[0]!.functionDeclarations.map((d) => d.name);
    expect(names(2)).to.deep.equal(['list_campaigns']);
    expect(names(3)).to.deep.equal(['list_campaigns', 'pause_campaign']);
  });
  it('sends no tools when the request offers none', async () => {
    server.script([{ text: 'final answer' }]);
    await model().generate(request({ tools: [] }));
    expect(server.requests[0]).to.not.have.property('tools');
    expect(server.requests[0]).to.not.have.property('toolConfig');
  });

  it('keeps the declarations but switches calling off when the request allows no tool call', async () => {
    server.script([{ text: 'final answer' }]);
    await model().generate(request({ toolChoice: 'none' }));
    expect(server.requests[0]?.tools).to.deep.equal([{ functionDeclarations: [{ name: 'list_campaigns', description: 'Every campaign.' }] }]);
    expect(server.requests[0]?.toolConfig).to.deep.equal({ functionCallingConfig: { mode: 'NONE' } });
  });

  it('sends the system prompt as systemInstruction', async () => {
    server.script([{ text: 'ok' }]);
    await model().generate(request({ system: 'Be brief.' }));
    expect(server.requests[0]?.systemInstruction).to.deep.equal({ role: 'system', parts: [{ text: 'Be brief.' }] });
  });

  it('retries a 429 and succeeds', async () => {
    server.script([{ status: 429, message: 'Resource has been exhausted (e.g. check quota).' }, { text: 'ok' }]);
    const turn = await model().generate(request());
    expect(turn.parts).to.deep.equal([{ kind: 'text', text: 'ok' }]);
    expect(server.requests).to.have.length(2);
  });

  it('waits at least the RetryInfo delay a 429 asks for', async () => {
    server.script([{ status: 429, message: 'quota', retryDelay: '0.2s' }, { text: 'ok' }]);
    const started = performance.now();
    await model({ retryBaseMs: 1 }).generate(request());
    expect(performance.now() - started).to.be.at.least(190);
  });

  it('retries 500s and succeeds within maxAttempts', async () => {
    server.script([
      { status: 500, message: 'An internal error has occurred.' },
      { status: 500, message: 'An internal error has occurred.' },
      { status: 500, message: 'An internal error has occurred.' },
      { text: 'ok' },
    ]);
    const turn = await model({ maxAttempts: 4 }).generate(request());
    expect(turn.parts).to.deep.equal([{ kind: 'text', text: 'ok' }]);
    expect(server.requests).to.have.length(4);
  });

  it('gives up with a ModelError after maxAttempts of persistent 500s', async () => {
    server.script(Array.from({ length: 6 }, () => ({ status: 503, message: 'The model is overloaded.' })));
    let clock = 1_000;
    const error = await rejection(model({ maxAttempts: 3, now: () => (clock += 250) }).generate(request()));
    expect(error).to.be.instanceOf(ModelError);
    expect((error as ModelError).status).to.equal(503);
    expect((error as ModelError).message).to.equal('The model is overloaded. (gave up after 3 attempts in 250 ms)');
    expect(server.requests).to.have.length(3);
  });

  it('fails a 400 at once with the API\'s message', async () => {
    server.script([{ status: 400, message: 'Invalid JSON payload received.' }, { text: 'never' }]);
    const error = await rejection(model().generate(request()));
    expect(error).to.be.instanceOf(ModelError);
    expect((error as ModelError).status).to.equal(400);
    expect((error as ModelError).message).to.equal('Invalid JSON payload received.');
    expect(server.requests).to.have.length(1);
  });

  it('fails on a wrong API key without retrying', async () => {
    server.script([{ text: 'never' }]);
    const error = await rejection(model({ apiKey: 'wrong' }).generate(request()));
    expect(error).to.be.instanceOf(ModelError);
    expect((error as ModelError).status).to.equal(400);
    expect((error as ModelError).message).to.equal('API key not valid. Please pass a valid API key.');
    expect(server.requests).to.have.length(1);
  });

  it('retries network failures, then fails with a ModelError', async () => {
    const dead = new FakeGeminiServer();
    const { baseUrl: deadUrl, close: closeDead } = await dead.start();
    await closeDead();
    const error = await rejection(model({ baseUrl: deadUrl, maxAttempts: 2 }).generate(request()));
    expect(error).to.be.instanceOf(ModelError);
    expect((error as ModelError).status).to.equal(undefined);
    expect((error as ModelError).message).to.match(/^network error: .*gave up after 2 attempts/);
  });

  it('rejects promptly with an AbortError when aborted during a slow response', async () => {
    server.script([{ delayMs: 5_000, then: { text: 'too late' } }]);
    const controller = new AbortController();
    const started = performance.now();
    const pending = model().generate(request({ signal: controller.signal }));
    setTimeout(() => controller.abort(), 50);
    const error = await rejection(pending);
    expect(performance.now() - started).to.be.below(1_000);
    expect(error).to.be.instanceOf(DOMException);
    expect((error as DOMException).name).to.equal('AbortError');
    expect(server.requests).to.have.length(1);
  });

  it('rejects with the signal\'s reason when aborted while backing off', async () => {
    server.script([{ status: 503, message: 'overloaded' }, { text: 'never' }]);
    const reason = new DOMException('budget used up', 'TimeoutError');
    const controller = new AbortController();
    const pending = model({ retryBaseMs: 10_000 }).generate(request({ signal: controller.signal }));
    setTimeout(() => controller.abort(reason), 100);
    const started = performance.now();
    expect(await rejection(pending)).to.equal(reason);
    expect(performance.now() - started).to.be.below(1_000);
    expect(server.requests).to.have.length(1);
  });

  it('does not call Gemini when the signal has already fired', async () => {
    server.script([{ text: 'never' }]);
    const error = await rejection(model().generate(request({ signal: AbortSignal.abort() })));
    expect((error as DOMException).name).to.equal('AbortError');
    // The SDK may already have started its fetch; give it a moment, then check nothing completed.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(server.remaining).to.equal(1);
  });

  it('fails with a ModelError when the prompt is blocked', async () => {
    server.script([{ promptBlocked: 'SAFETY' }]);
    const error = await rejection(model().generate(request()));
    expect(error).to.be.instanceOf(ModelError);
    expect((error as ModelError).message).to.equal('Gemini blocked the prompt (SAFETY)');
    expect(server.requests).to.have.length(1);
  });

  it('fails with a ModelError when the answer stops for safety', async () => {
    server.script([{ text: 'partial', finishReason: 'SAFETY' }]);
    const error = await rejection(model().generate(request()));
    expect(error).to.be.instanceOf(ModelError);
    expect((error as ModelError).message).to.equal('Gemini blocked the answer (finish reason SAFETY)');
  });

  it('fails with a ModelError when there are no candidates', async () => {
    server.script([{ body: { candidates: [] } }]);
    const error = await rejection(model().generate(request()));
    expect(error).to.be.instanceOf(ModelError);
    expect((error as ModelError).message).to.equal('Gemini returned no candidates');
  });

  describe('finish reasons', () => {
    const answer = (finishReason: string, parts: unknown[] = []) => ({
      body: { candidates: [{ content: { role: 'model', parts }, finishReason, index: 0 }], usageMetadata: { promptTokenCount: 40, candidatesTokenCount: 3, thoughtsTokenCount: 900 } },
    });

    it('given MAX_TOKENS after some text, then the turn is that text marked truncated', async () => {
      server.script([{ text: 'Your three worst campaigns are: 1.', finishReason: 'MAX_TOKENS' }]);
      const turn = await model().generate(request());
      expect(turn.parts).to.deep.equal([{ kind: 'text', text: 'Your three worst campaigns are: 1.' }]);
      expect(turn.truncated).to.equal(true);
    });

    it('given MAX_TOKENS before any answer (thinking used it up), then a ModelError carrying the tokens spent', async () => {
      server.script([answer('MAX_TOKENS')]);
      const error = await rejection(model().generate(request()));
      expect(error).to.be.instanceOf(ModelError);
      expect((error as ModelError).message).to.equal('Gemini used up its output-token limit before answering (finish reason MAX_TOKENS)');
      expect((error as ModelError).usage).to.deep.equal({ input_tokens: 40, output_tokens: 903 });
    });

    it('given UNEXPECTED_TOOL_CALL, then a ModelError saying so', async () => {
      server.script([answer('UNEXPECTED_TOOL_CALL')]);
      const error = await rejection(model().generate(request({ toolChoice: 'none' })));
      expect(error).to.be.instanceOf(ModelError);
      expect((error as ModelError).message).to.equal('Gemini called a tool when it was not allowed to (finish reason UNEXPECTED_TOOL_CALL)');
    });

    it('given OTHER with no content, then a ModelError saying so', async () => {
      server.script([answer('OTHER')]);
      const error = await rejection(model().generate(request()));
      expect(error).to.be.instanceOf(ModelError);
      expect((error as ModelError).message).to.equal('Gemini ended without an answer (finish reason OTHER)');
    });
  });

  describe('usage', () => {
    const withUsage = (usageMetadata: Record<string, unknown>) => ({
      body: { candidates: [{ content: { role: 'model', parts: [{ text: 'hi' }] }, finishReason: 'STOP' }], usageMetadata },
    });

    it('counts thinking tokens as output and tool-use prompt tokens as input, as Gemini bills them', async () => {
      server.script([{ text: 'hi', usage: { input: 10, output: 2, thoughts: 5000, toolUsePrompt: 7 } }]);
      expect((await model().generate(request())).usage).to.deep.equal({ input_tokens: 17, output_tokens: 5002 });
    });

    it('counts 0 for a count that is not a non-negative finite number', async () => {
      server.script([withUsage({ promptTokenCount: '10', candidatesTokenCount: -4, thoughtsTokenCount: 1e400, toolUsePromptTokenCount: null })]);
      expect((await model().generate(request())).usage).to.deep.equal({ input_tokens: 0, output_tokens: 0 });
    });
  });

  describe('malformed function calls', () => {
    const calling = (functionCall: unknown) => ({ body: { candidates: [{ content: { role: 'model', parts: [{ functionCall }] }, finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 12, candidatesTokenCount: 4 } } });
    const rows: [string, unknown, string][] = [
      ['an empty name', { name: '', args: {} }, 'Gemini produced a malformed function call: its name is empty'],
      ['a name that is not a string', { name: 42, args: {} }, 'Gemini produced a malformed function call: its name is a number, not a string'],
      ['a name over 128 characters', { name: 'x'.repeat(129) }, 'Gemini produced a malformed function call: its name is 129 characters long (at most 128)'],
      ['arguments as a string', { name: 'list_campaigns', args: '{"a":1}' }, 'Gemini produced a malformed function call: the arguments of list_campaigns are a string, not an object'],
      ['arguments as an array', { name: 'list_campaigns', args: [1, 2] }, 'Gemini produced a malformed function call: the arguments of list_campaigns are an array, not an object'],
    ];
    for (const [label, functionCall, message] of rows) {
      it(`given a call with ${label}, then a ModelError carrying the tokens spent`, async () => {
        server.script([calling(functionCall)]);
        const error = await rejection(model().generate(request()));
        expect(error).to.be.instanceOf(ModelError);
        expect((error as ModelError).message).to.equal(message);
        expect((error as ModelError).usage).to.deep.equal({ input_tokens: 12, output_tokens: 4 });
      });
    }

    it('takes null arguments as none', async () => {
      server.script([calling({ name: 'list_campaigns', args: null })]);
      expect((await model().generate(request())).parts).to.deep.equal([{ kind: 'function_call', call: { name: 'list_campaigns', args: {} } }]);
    });
  });

  it('skips thought summaries and keeps text and calls in order', async () => {
    server.script([
      {
        body: {
          candidates: [
            {
              content: {
                role: 'model',
                parts: [{ text: 'thinking…', thought: true }, { functionCall: { name: 'list_campaigns' } }, { text: 'and then' }],
              },
              finishReason: 'STOP',
            },
          ],
        },
      },
    ]);
    const turn = await model().generate(request());
    expect(turn.parts).to.deep.equal([
      { kind: 'function_call', call: { name: 'list_campaigns', args: {} } },
      { kind: 'text', text: 'and then' },
    ]);
  });

  it('fails with a ModelError, without calling Gemini, for a tool schema Gemini cannot express', async () => {
    const bad: ToolDeclaration = { name: 'bad', description: 'x', parameters: { type: 'object', properties: { v: { type: ['string', 'number'] } } } };
    const error = await rejection(model().generate(request({ tools: [bad] })));
    expect(error).to.be.instanceOf(ModelError);
    expect((error as ModelError).message).to.match(/bad\.parameters\.v/);
    expect(server.requests).to.have.length(0);
  });
});
