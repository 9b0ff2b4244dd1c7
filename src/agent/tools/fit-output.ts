import { clipText } from '../../text/clip-text.ts';

/** How a tool output was cut to fit: which list, how many of its rows were kept, and what to ask instead. */
export interface OutputCut {
  readonly member: string;
  readonly kept: number;
  readonly of: number;
  readonly note: string;
}

const NARROW_IT = 'the output was too long for the model: only the first rows are shown; ask for less (campaign_id, a shorter date range or a limit) to see others';

/**
 * A tool's output within `maxChars` of JSON, for the model and the ToolCalled event alike (so the
 * history shows what the model saw). An account's keyword or campaign list on a real platform can
 * run to megabytes: sent whole, every later turn would send it again, until Gemini refuses the
 * request or the workspace's token quota is spent. The longest top-level list is cut to the rows
 * that fit (whole rows, so the model still reads JSON it can trust), and `cut` says how many were
 * kept of how many and how to ask for the rest. An output with no list to cut is kept as a clipped
 * string.
 *
 * @example
 * fitOutput({ keywords: rows }, 200_000); // { keywords: rows.slice(0, 1624), cut: { member: 'keywords', kept: 1624, of: 40_000, note: '…' } }
 */
export function fitOutput(output: Record<string, unknown>, maxChars: number): Record<string, unknown> {
  const json = JSON.stringify(output);
  if (json.length <= maxChars) return output;
  const member = longestList(output);
  if (member !== undefined) {
    const rows = output[member] as unknown[];
    const withRows = (kept: number) => ({ ...output, [member]: rows.slice(0, kept), cut: { member, kept, of: rows.length, note: NARROW_IT } satisfies OutputCut });
    // The most rows that fit, by halving: each probe serializes at most the whole output once.
    let low = 0;
    let high = rows.length - 1;
    while (low < high) {
      const middle = Math.ceil((low + high) / 2);
      if (JSON.stringify(withRows(middle)).length <= maxChars) low = middle;
      else high = middle - 1;
    }
    const fitted = withRows(low);
    if (JSON.stringify(fitted).length <= maxChars) return fitted;
  }
  return { truncated_output: clipText(json, maxChars), original_chars: json.length, note: NARROW_IT };
}

/** The top-level array member with the longest JSON, if any. */
function longestList(output: Record<string, unknown>): string | undefined {
  let longest: string | undefined;
  let longestChars = -1;
  for (const [key, value] of Object.entries(output)) {
    if (!Array.isArray(value) || value.length === 0) continue;
    const chars = JSON.stringify(value).length;
    if (chars > longestChars) {
      longest = key;
      longestChars = chars;
    }
  }
  return longest;
}
