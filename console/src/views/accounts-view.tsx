import { useEffect, useState } from 'preact/hooks';
import { apiPaths, apiRequest, describeError, mayPass } from '../api/api-client.ts';
import type { Account, ListPage } from '../api/types.ts';
import { routePaths } from '../routing/routes.ts';
import { LoadState, type Loadable } from '../components/load-state.tsx';
import { Untrusted } from '../components/untrusted-text.tsx';
import { Backoff, sleep } from '../live/backoff.ts';

/**
 * The key's accounts, each a link to its approvals and its history. A read that fails in a
 * way that may pass (no answer, 408, 429, 5xx) is tried again after 1 s, 2, 4, … up to 30 s
 * (never sooner than Retry-After), and the page says when; "Try again now" does not wait.
 * Any other failure is said, with a "Try again" button.
 */
export function AccountsView() {
  const [accounts, setAccounts] = useState<Loadable<readonly Account[]>>({ state: 'loading' });
  /** Bumped by the retry button: reads again at once. */
  const [attempt, setAttempt] = useState(0);
  /** When the next automatic read comes (seconds), or null when there is none. */
  const [retryIn, setRetryIn] = useState<number | null>(null);

  useEffect(() => {
    const controller = new AbortController();
    const { signal } = controller;
    const backoff = new Backoff();
    void (async () => {
      for (;;) {
        try {
          const { body } = await apiRequest<ListPage<Account>>('GET', apiPaths.accounts(), { signal });
          setRetryIn(null);
          setAccounts({ state: 'ready', value: body.data });
          return;
        } catch (error) {
          if (signal.aborted) return;
          const wait = mayPass(error) ? backoff.next(error) : null;
          setRetryIn(wait);
          const next = wait === null ? 'Use "Try again" to read them again.' : `The page tries again by itself in ${wait} s.`;
          setAccounts({ state: 'error', message: `The accounts could not be read: ${describeError(error)} ${next}` });
          if (wait === null) return;
          await sleep(wait * 1000, signal);
          if (signal.aborted) return;
        }
      }
    })();
    return () => controller.abort();
  }, [attempt]);

  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Accounts</h1>
      <LoadState loadable={accounts} loadingText="Loading accounts…" emptyText="This workspace has no accounts yet.">
        {(list) => (
          <ul class="account-list">
            {list.map((account) => (
              <li key={account.id} class="card">
                <h2 class="card-title">
                  <a href={routePaths.approvals(account.id)}><Untrusted text={account.name} /></a>
                </h2>
                <p class="muted">
                  {account.platform === 'none' ? 'no platform' : <Untrusted text={account.platform} />} · {account.connected ? 'connected' : 'not connected'}
                </p>
                <p>
                  <a href={routePaths.approvals(account.id)}>Approvals</a> · <a href={routePaths.history(account.id)}>History</a>
                </p>
              </li>
            ))}
          </ul>
        )}
      </LoadState>
      {accounts.state === 'error' && (
        <p>
          <button type="button" class="button-secondary" onClick={() => { setAccounts({ state: 'loading' }); setAttempt((count) => count + 1); }}>
            {retryIn !== null ? 'Try again now' : 'Try again'}
          </button>
        </p>
      )}
    </section>
  );
}
