import { useEffect, useState } from 'preact/hooks';
import { apiPaths, apiRequest } from '../api/api-client.ts';
import type { Account, ListPage } from '../api/types.ts';
import { routePaths } from '../routing/routes.ts';
import { LoadState, type Loadable } from '../components/load-state.tsx';

/** The key's accounts, each a link to its approvals and its history. */
export function AccountsView() {
  const [accounts, setAccounts] = useState<Loadable<readonly Account[]>>({ state: 'loading' });
  useEffect(() => {
    const controller = new AbortController();
    apiRequest<ListPage<Account>>('GET', apiPaths.accounts(), { signal: controller.signal })
      .then(({ body }) => setAccounts({ state: 'ready', value: body.data }))
      .catch((error: unknown) => {
        if (!controller.signal.aborted) setAccounts({ state: 'error', message: error instanceof Error ? error.message : String(error) });
      });
    return () => controller.abort();
  }, []);

  return (
    <section aria-labelledby="page-title">
      <h1 id="page-title">Accounts</h1>
      <LoadState loadable={accounts} loadingText="Loading accounts…" emptyText="This workspace has no accounts yet.">
        {(list) => (
          <ul class="account-list">
            {list.map((account) => (
              <li key={account.id} class="card">
                <h2 class="card-title">
                  <a href={routePaths.approvals(account.id)}>{account.name}</a>
                </h2>
                <p class="muted">
                  {account.platform === 'none' ? 'no platform' : account.platform} · {account.connected ? 'connected' : 'not connected'}
                </p>
                <p>
                  <a href={routePaths.approvals(account.id)}>Approvals</a> · <a href={routePaths.history(account.id)}>History</a>
                </p>
              </li>
            ))}
          </ul>
        )}
      </LoadState>
    </section>
  );
}
