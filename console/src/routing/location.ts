import { useEffect, useState } from 'preact/hooks';

const CHANGE = 'console:navigate';

/** Moves to another console page without a reload (history API). */
export function navigate(href: string, options: { replace?: boolean } = {}): void {
  if (options.replace) window.history.replaceState(null, '', href);
  else window.history.pushState(null, '', href);
  window.dispatchEvent(new Event(CHANGE));
  window.scrollTo(0, 0);
}

/** The current path and query, updated on navigate() and the back/forward buttons. */
export function useLocation(): { pathname: string; search: URLSearchParams } {
  const read = () => ({ pathname: window.location.pathname, search: new URLSearchParams(window.location.search) });
  const [location, setLocation] = useState(read);
  useEffect(() => {
    const update = () => setLocation(read());
    window.addEventListener('popstate', update);
    window.addEventListener(CHANGE, update);
    return () => {
      window.removeEventListener('popstate', update);
      window.removeEventListener(CHANGE, update);
    };
  }, []);
  return location;
}

/**
 * Same-origin links inside the console navigate in place; modified clicks (new tab, ...)
 * keep the browser's behaviour.
 */
export function interceptLinkClick(event: MouseEvent): void {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const anchor = (event.target as Element | null)?.closest?.('a');
  if (!anchor || anchor.target || anchor.hasAttribute('download')) return;
  const url = new URL(anchor.href, window.location.href);
  if (url.origin !== window.location.origin || !url.pathname.startsWith('/console')) return;
  event.preventDefault();
  navigate(url.pathname + url.search);
}
