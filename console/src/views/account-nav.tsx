import type { Account } from '../api/types.ts';
import { Untrusted } from '../components/untrusted-text.tsx';
import { routePaths } from '../routing/routes.ts';

/** The account's name and its two views, with the current one marked for assistive technology. */
export function AccountNav(props: { projectId: string; account: Account | null; current: 'approvals' | 'history' }) {
  return (
    <nav class="account-nav" aria-label="Account">
      <a href={routePaths.accounts()}>Accounts</a>
      <span aria-hidden="true"> / </span>
      <span class="account-name"><Untrusted text={props.account?.name ?? props.projectId} /></span>
      <span aria-hidden="true"> · </span>
      <a href={routePaths.approvals(props.projectId)} aria-current={props.current === 'approvals' ? 'page' : undefined}>Approvals</a>
      <span aria-hidden="true"> · </span>
      <a href={routePaths.history(props.projectId)} aria-current={props.current === 'history' ? 'page' : undefined}>History</a>
    </nav>
  );
}
