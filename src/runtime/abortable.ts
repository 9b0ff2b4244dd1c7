/**
 * Waits that end when a signal fires, whatever the awaited library does with it: the Gemini
 * adapter (SDK 0.24 wraps fetch's abort in its own GoogleGenerativeAIAbortError, named plain
 * "Error", and ignores a signal already aborted when the call starts) and the workers' pull loop
 * (a JetStream fetch cannot be cancelled). The listener is removed once the promise settles, so
 * a long-lived signal does not keep every awaited value reachable.
 */

/** The error to reject with once `signal` fired: its reason, or a DOMException 'AbortError'. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

/** Settles like `promise`, unless `signal` fires first: then rejects with {@link abortReason} at once. */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    // The losing promise must not turn into an unhandled rejection.
    promise.catch(() => {});
    return Promise.reject(abortReason(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** Waits `ms`, or rejects with {@link abortReason} as soon as `signal` fires. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortReason(signal));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
