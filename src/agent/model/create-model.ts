import type { Config } from '../../config/config.ts';
import { GeminiModel } from './gemini/gemini-model.ts';
import type { ModelClient } from './model-port.ts';
import { RulesModel } from './rules/rules-model.ts';
import { SanitizingModel } from './sanitizing-model.ts';

/** Gemini when GEMINI_API_KEY is set, the built-in rules agent otherwise; either one's output sanitised. */
export function createModel(config: Config): ModelClient {
  if (!config.geminiApiKey) return new SanitizingModel(new RulesModel());
  return new SanitizingModel(new GeminiModel({ apiKey: config.geminiApiKey, model: config.geminiModel, baseUrl: config.geminiBaseUrl }));
}
