import { useState } from 'preact/hooks';
import { ApiProblem, apiPaths, apiRequest } from '../api/api-client.ts';
import { storeApiKey } from '../session/api-key-store.ts';

/**
 * Asks for an API key and checks it with GET /api/v1/accounts before keeping it (in
 * sessionStorage). The form never submits anywhere: the key must not reach a URL.
 */
export function SignInView(props: { notice: string | null; onSignedIn: () => void }) {
  const [key, setKey] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const submit = async (event: Event) => {
    event.preventDefault();
    const candidate = key.trim();
    if (candidate === '') {
      setError('Enter an API key.');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      await apiRequest('GET', apiPaths.accounts(), { key: candidate });
      storeApiKey(candidate);
      props.onSignedIn();
    } catch (failure) {
      if (failure instanceof ApiProblem && failure.status === 401) setError('That API key is not valid.');
      else setError(failure instanceof Error ? failure.message : 'Sign-in failed.');
      setBusy(false);
    }
  };

  return (
    <section class="sign-in" aria-labelledby="page-title">
      <h1 id="page-title">Sign in</h1>
      <p>Use an API key of your workspace. It is kept in this browser tab only and forgotten when you close it.</p>
      {props.notice && <p class="notice" role="status">{props.notice}</p>}
      <form onSubmit={submit} noValidate>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autoComplete="off"
          spellcheck={false}
          value={key}
          onInput={(event) => setKey((event.currentTarget as HTMLInputElement).value)}
          aria-invalid={error !== null}
          aria-describedby={error ? 'api-key-error' : undefined}
          required
        />
        <p id="api-key-error" class="field-error" role="alert">{error ?? ''}</p>
        <button type="submit" disabled={busy}>{busy ? 'Signing in…' : 'Sign in'}</button>
      </form>
    </section>
  );
}
