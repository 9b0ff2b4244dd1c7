import type { ComponentChildren } from 'preact';

export type Loadable<T> =
  | { readonly state: 'loading' }
  | { readonly state: 'error'; readonly message: string }
  | { readonly state: 'ready'; readonly value: T };

/** Loading, error and empty states of a list, so every view says the same thing the same way. */
export function LoadState<T extends readonly unknown[]>(props: {
  loadable: Loadable<T>;
  loadingText: string;
  emptyText: string;
  children: (value: T) => ComponentChildren;
}) {
  const { loadable } = props;
  if (loadable.state === 'loading') return <p class="placeholder" role="status" aria-busy="true">{props.loadingText}</p>;
  if (loadable.state === 'error') return <p class="error" role="alert">{loadable.message}</p>;
  if (loadable.value.length === 0) return <p class="placeholder">{props.emptyText}</p>;
  return <>{props.children(loadable.value)}</>;
}

/** A timestamp as the reader's local date and time, with the exact value in a <time>. */
export function Timestamp(props: { value: string | null | undefined }) {
  if (!props.value) return <span class="muted">—</span>;
  const date = new Date(props.value);
  return <time dateTime={props.value}>{Number.isNaN(date.getTime()) ? props.value : date.toLocaleString()}</time>;
}
