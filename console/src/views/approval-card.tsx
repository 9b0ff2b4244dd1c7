import { useEffect, useRef, useState } from 'preact/hooks';
import { proposalFigures } from '../api/proposal-figures.ts';
import { ACTIONABLE_STATUSES, isEditable, type ActionEdit, type Approval, type EditableKind } from '../api/types.ts';
import { EditForm } from './edit-form.tsx';
import { ActionParams, ValueView } from '../components/value-view.tsx';
import { Timestamp } from '../components/load-state.tsx';
import { Untrusted } from '../components/untrusted-text.tsx';
import { routePaths } from '../routing/routes.ts';
import { revealHiddenCharacters } from '../text/hidden-characters.ts';

export interface ApprovalCardProps {
  readonly action: Approval;
  /** False for read-scoped keys: the buttons stay disabled. */
  readonly canAct: boolean;
  readonly busy: boolean;
  readonly selected: boolean;
  readonly onToggleSelected: (selected: boolean) => void;
  readonly onApprove: () => void;
  /**
   * Approves with an edit (negative keywords, budget or target value) made on `version`, the
   * version the edit form was opened on; resolves true when it went through.
   */
  readonly onApproveEdited: (edit: ActionEdit, version: string) => Promise<boolean>;
  readonly onReject: (reason: string) => Promise<boolean>;
}

const STATUS_LABELS: Record<string, string> = {
  queued: 'Waiting for approval',
  auto_applied: 'Auto-applied',
  approved: 'Approved, being applied',
  applying: 'Applying',
  applied: 'Applied',
  returned: 'Returned to the queue',
  rejected: 'Rejected',
  blocked: 'Blocked by policy',
};

/** One action of the approvals view: what it changes, why, and the decision buttons. */
export function ApprovalCard(props: ApprovalCardProps) {
  const { action, canAct, busy } = props;
  const [rejecting, setRejecting] = useState(false);
  /** The action as it was when the edit form opened (the form edits and sends that version), or null. */
  const [editingFrom, setEditingFrom] = useState<Approval | null>(null);
  const editing = editingFrom !== null;
  const reasonField = useRef<HTMLTextAreaElement>(null);
  const editButton = useRef<HTMLButtonElement>(null);
  const rejectButton = useRef<HTMLButtonElement>(null);
  const [reason, setReason] = useState('');
  const [reasonError, setReasonError] = useState<string | null>(null);
  const actionable = ACTIONABLE_STATUSES.includes(action.status);
  const enabled = canAct && actionable && !busy;
  const titleId = `action-${action.id}-title`;
  const reasonId = `action-${action.id}-reason`;

  // The pressed button is disabled while its form is open: the form takes the focus (the edit
  // form focuses its first control itself), and Cancel gives it back to the button.
  useEffect(() => {
    if (rejecting) reasonField.current?.focus();
  }, [rejecting]);
  const cancelReject = () => {
    setRejecting(false);
    setReasonError(null);
    // Enabled again once the form is gone.
    setTimeout(() => rejectButton.current?.focus(), 0);
  };
  const cancelEdit = () => {
    setEditingFrom(null);
    setTimeout(() => editButton.current?.focus(), 0);
  };

  const confirmReject = async (event: Event) => {
    event.preventDefault();
    if (reason.trim() === '') {
      setReasonError('Say why the action is rejected.');
      return;
    }
    setReasonError(null);
    if (await props.onReject(reason.trim())) {
      setRejecting(false);
      setReason('');
    }
  };

  return (
    <article class={`card action status-${action.status}`} aria-labelledby={titleId} data-action-id={action.id}>
      <div class="action-head">
        {actionable && (
          <input
            type="checkbox"
            class="select-box"
            checked={props.selected}
            disabled={!enabled}
            aria-label={`Select: ${revealHiddenCharacters(action.summary)}`}
            onChange={(event) => props.onToggleSelected((event.currentTarget as HTMLInputElement).checked)}
          />
        )}
        <h2 id={titleId} class="card-title"><Untrusted text={action.summary} /></h2>
      </div>
      <p class="status-line">
        <span class={`badge badge-${action.status}`}>{STATUS_LABELS[action.status] ?? action.status}</span>
        {action.status_reason && <span class="status-reason"> — <Untrusted text={action.status_reason} /></span>}
      </p>
      {action.edited && (
        <p class="edited-note">
          <span class="badge">Edited</span> before approval by {action.edited.by.kind === 'api_key' ? 'key ' : ''}<Untrusted text={action.edited.by.id} />, <Timestamp value={action.edited.at} />
        </p>
      )}
      <dl class="facts">
        <div><dt>Kind</dt><dd><Untrusted text={action.kind} /></dd></div>
        <div><dt>Risk tier</dt><dd><span class={`tier tier-${action.risk_tier}`}><Untrusted text={action.risk_tier} /></span></dd></div>
        <div><dt>Proposed</dt><dd><Timestamp value={action.created_at} /></dd></div>
        <div>
          <dt>Proposed by</dt>
          <dd>{action.run_id ? <a href={routePaths.run(action.run_id)}>run {action.run_id.slice(0, 8)}…</a> : 'a direct request'}</dd>
        </div>
      </dl>
      {action.reason && <p class="action-reason"><Untrusted text={action.reason} /></p>}
      <h3 class="subhead">Policy reasons</h3>
      <ul class="reasons">
        {action.policy_reasons.map((policyReason, index) => <li key={index}><Untrusted text={policyReason} /></li>)}
      </ul>
      <details class="disclosure">
        <summary>Change details</summary>
        <ActionParams params={action.params} />
      </details>
      {action.edited && (
        <details class="disclosure">
          <summary>As proposed, before the edit</summary>
          <p><Untrusted text={action.edited.original.summary} /></p>
          <p>Risk tier: <span class={`tier tier-${action.edited.original.risk_tier}`}><Untrusted text={action.edited.original.risk_tier} /></span></p>
          <ActionParams params={action.edited.original.params} />
        </details>
      )}
      <Figures action={action} />
      <div class="decision">
        <button type="button" disabled={!enabled} onClick={props.onApprove}>Approve</button>
        {isEditable(action.kind) && (
          <button type="button" class="button-secondary" ref={editButton} disabled={!enabled || editing} onClick={() => { setEditingFrom(action); setRejecting(false); }}>Edit</button>
        )}
        <button type="button" class="button-secondary" ref={rejectButton} disabled={!enabled || rejecting} onClick={() => { setRejecting(true); setEditingFrom(null); }}>Reject</button>
      </div>
      {editingFrom && enabled && isEditable(editingFrom.kind) && (
        <EditForm
          action={editingFrom as Approval & { kind: EditableKind }}
          changedSince={editingFrom.version !== action.version}
          onCancel={cancelEdit}
          onApproveEdited={async (edit) => {
            const done = await props.onApproveEdited(edit, editingFrom.version);
            if (done) setEditingFrom(null);
            return done;
          }}
        />
      )}
      {rejecting && enabled && (
        <form class="reject-form" onSubmit={confirmReject}>
          <label for={reasonId}>Reason</label>
          <textarea id={reasonId} ref={reasonField} rows={2} maxLength={2000} value={reason} required
            aria-invalid={reasonError !== null}
            onInput={(event) => setReason((event.currentTarget as HTMLTextAreaElement).value)} />
          {reasonError && <p class="field-error" role="alert">{reasonError}</p>}
          <div class="decision">
            <button type="submit" class="button-danger">Confirm reject</button>
            <button type="button" class="button-quiet" onClick={cancelReject}>Cancel</button>
          </div>
        </form>
      )}
    </article>
  );
}

/** The figures the proposal was based on, read from the history when first opened. */
function Figures(props: { action: Approval }) {
  const [figures, setFigures] = useState<{ state: 'idle' | 'loading' } | { state: 'ready'; value: Record<string, unknown> | null } | { state: 'error'; message: string }>({ state: 'idle' });
  const load = () => {
    // Not read again once read; after a failure, opening the section again tries again.
    if (figures.state === 'loading' || figures.state === 'ready') return;
    setFigures({ state: 'loading' });
    proposalFigures(props.action.project_id, props.action.run_id ?? props.action.id, props.action.id, Boolean(props.action.edited))
      .then((value) => setFigures({ state: 'ready', value }))
      .catch((error: unknown) => setFigures({ state: 'error', message: error instanceof Error ? error.message : String(error) }));
  };
  return (
    <details class="disclosure" onToggle={(event) => { if ((event.currentTarget as HTMLDetailsElement).open) load(); }}>
      <summary>Figures it was based on</summary>
      {figures.state === 'loading' && <p class="placeholder" role="status">Loading figures…</p>}
      {figures.state === 'error' && <p class="error" role="alert">{figures.message} Close and open this section to try again.</p>}
      {figures.state === 'ready' && (figures.value ? <ValueView value={figures.value} /> : <p class="muted">No figures were recorded with this proposal.</p>)}
    </details>
  );
}
