/** The specification's limits on a run. Wall clock and model budget are configurable (RUN_TIMEOUT_MS, RUN_MODEL_BUDGET_MS). */
export const RUN_LIMITS = {
  /** Tool calls per run; after that the model may not call tools (declared, calling off) and must answer. */
  maxToolCalls: 10,
  /** Entries kept in result.tool_calls. */
  maxRecordedToolCalls: 50,
  /** Characters of result.text; longer answers are cut and `truncated` set. */
  maxTextLength: 32_000,
  /** Model turns per run, a backstop against a model that never stops asking for tools. */
  maxSteps: 25,
  /**
   * Largest tool output the model is given and a ToolCalled event keeps (JSON characters, about
   * 50,000 tokens; the 500 search terms get_search_terms may return fit): longer lists are cut to
   * whole rows with a note saying how to ask for less (src/agent/tools/fit-output.ts).
   */
  maxToolOutputChars: 200_000,
  /**
   * Largest tool input kept in a ToolCalled event (JSON characters); larger ones are kept cut.
   * Input and output share one event, which the event log takes up to 1 MB.
   */
  maxToolInputChars: 20_000,
  /** Longest tool error message the model is told and ToolCalled keeps. */
  maxToolErrorChars: 2_000,
} as const;
