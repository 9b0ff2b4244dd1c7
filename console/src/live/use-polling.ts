import { useEffect, useRef } from 'preact/hooks';
import { ApiProblem } from '../api/api-client.ts';

/**
 * Calls `load` now and then every `intervalMs` while the page is visible, never two at
 * once. A failure carrying `Retry-After` (429, 503) waits that long before the next call.
 * `deps` restart the loop (e.g. a changed filter).
 */
export function usePolling(load: (signal: AbortSignal) => Promise<void>, intervalMs: number, deps: readonly unknown[]): void {
  const latest = useRef(load);
  latest.current = load;
  useEffect(() => {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      let delay = intervalMs;
      if (document.visibilityState !== 'hidden') {
        try {
          await latest.current(controller.signal);
        } catch (error) {
          if (error instanceof ApiProblem && error.retryAfterSeconds !== null) delay = Math.max(delay, error.retryAfterSeconds * 1000);
        }
      }
      if (!controller.signal.aborted) timer = setTimeout(() => void tick(), delay);
    };
    void tick();
    return () => {
      controller.abort();
      if (timer !== undefined) clearTimeout(timer);
    };
  }, deps);
}
