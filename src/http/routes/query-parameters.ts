import type { MessageOverrides, QueryParameter } from '../route-table/route-definition.ts';

/** `?run_id=`: only what belongs to one run. */
export const RUN_ID_FILTER: QueryParameter = {
  description: 'Only what belongs to this run (a run id; anything else answers 422).',
  schema: { type: 'string', format: 'uuid' },
};

/** `?limit=`: a page size, plain decimal digits within the route's bounds. */
export function pageSizeParameter(page: { readonly default: number; readonly max: number }): QueryParameter {
  return {
    description: `Page size, 1 to ${page.max}.`,
    schema: { type: 'integer', minimum: 1, maximum: page.max, default: page.default },
  };
}

/** `?cursor=`: the `next_cursor` of a previous page (a stream sequence). */
export function cursorParameter(description: string): QueryParameter {
  return { description, schema: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER } };
}

/** A cursor is not a number the client makes up: say where it comes from. */
export const CURSOR_MESSAGES: MessageOverrides = {
  '/cursor': {
    type: 'must be a cursor from a previous page (its `next_cursor`)',
    minimum: 'must be a cursor from a previous page (its `next_cursor`)',
    maximum: 'must be a cursor from a previous page (its `next_cursor`)',
  },
  '/run_id': { format: 'must be a run id (a UUID, as POST /api/v1/runs returned it)' },
};
