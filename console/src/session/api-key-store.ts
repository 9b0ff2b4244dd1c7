/**
 * The API key lives in sessionStorage only: it dies with the tab, is never written to
 * localStorage, a cookie or a URL, and other tabs do not see it.
 */
const STORAGE_NAME = 'adsagent.console.api-key';

export function readApiKey(): string | null {
  try {
    return window.sessionStorage.getItem(STORAGE_NAME);
  } catch {
    return null;
  }
}

export function storeApiKey(key: string): void {
  window.sessionStorage.setItem(STORAGE_NAME, key);
}

export function forgetApiKey(): void {
  window.sessionStorage.removeItem(STORAGE_NAME);
}
