import { useEffect, useRef, useState } from 'preact/hooks';
import { whenUnauthorized } from './api/api-client.ts';
import { interceptLinkClick, useLocation } from './routing/location.ts';
import { parseRoute, routePaths, type Route } from './routing/routes.ts';
import { forgetApiKey, readApiKey } from './session/api-key-store.ts';
import { AccountsView } from './views/accounts-view.tsx';
import { ApprovalsView } from './views/approvals-view.tsx';
import { HistoryView } from './views/history-view.tsx';
import { RunView } from './views/run-view.tsx';
import { SignInView } from './views/sign-in-view.tsx';

const PAGE_TITLES: Record<Route['name'], string> = {
  accounts: 'Accounts',
  approvals: 'Approvals',
  history: 'History',
  run: 'Run',
  'not-found': 'Page not found',
};

/** Signed out until a key is in sessionStorage; every page needs one. */
export function App() {
  const [signedIn, setSignedIn] = useState(() => readApiKey() !== null);
  const [notice, setNotice] = useState<string | null>(null);
  const location = useLocation();

  useEffect(() => {
    whenUnauthorized(() => {
      forgetApiKey();
      setNotice('Your API key is no longer valid. Sign in again.');
      setSignedIn(false);
    });
    document.addEventListener('click', interceptLinkClick);
    return () => document.removeEventListener('click', interceptLinkClick);
  }, []);

  // After an in-app navigation, screen readers and keyboard users start at the new page.
  const firstPath = useRef(location.pathname);
  useEffect(() => {
    document.title = `${PAGE_TITLES[parseRoute(location.pathname).name]} · Approvals console`;
    if (location.pathname === firstPath.current) return;
    firstPath.current = '';
    document.getElementById('main')?.focus();
  }, [location.pathname]);

  const signOut = () => {
    forgetApiKey();
    setNotice('Signed out.');
    setSignedIn(false);
  };

  if (!signedIn) {
    return (
      <Shell onSignOut={null}>
        <SignInView notice={notice} onSignedIn={() => { setNotice(null); setSignedIn(true); }} />
      </Shell>
    );
  }
  const route = parseRoute(location.pathname);
  return (
    <Shell onSignOut={signOut}>
      {route.name === 'accounts' && <AccountsView />}
      {route.name === 'approvals' && <ApprovalsView key={route.projectId} projectId={route.projectId} search={location.search} />}
      {route.name === 'history' && <HistoryView key={route.projectId} projectId={route.projectId} search={location.search} />}
      {route.name === 'run' && <RunView key={route.runId} runId={route.runId} />}
      {route.name === 'not-found' && (
        <section aria-labelledby="page-title">
          <h1 id="page-title">Page not found</h1>
          <p>
            There is no console page at this address. <a href={routePaths.accounts()}>Go to your accounts</a>.
          </p>
        </section>
      )}
    </Shell>
  );
}

function Shell(props: { onSignOut: (() => void) | null; children: preact.ComponentChildren }) {
  return (
    <>
      <a class="skip-link" href="#main">Skip to content</a>
      <header class="top-bar">
        <a class="brand" href={routePaths.accounts()}>Approvals console</a>
        {props.onSignOut && (
          <button type="button" class="button-quiet" onClick={props.onSignOut}>Sign out</button>
        )}
      </header>
      <main id="main" tabIndex={-1}>{props.children}</main>
    </>
  );
}
