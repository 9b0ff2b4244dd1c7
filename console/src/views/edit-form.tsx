import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { Untrusted } from '../components/untrusted-text.tsx';
import { revealHiddenCharacters } from '../text/hidden-characters.ts';
import { EDITABLE_FIELDS, MATCH_TYPES, type ActionEdit, type Approval, type EditableKind, type Keyword } from '../api/types.ts';

export interface EditFormProps {
  /** The action as it was when the form opened: the form edits that version, and it is the one approved. */
  readonly action: Approval & { readonly kind: EditableKind };
  /** The action has a newer version than `action` (edited elsewhere, or returned): the service will refuse this edit. */
  readonly changedSince: boolean;
  /** Approves with the edit; resolves true when it went through (the form then closes). */
  readonly onApproveEdited: (edit: ActionEdit) => Promise<boolean>;
  readonly onCancel: () => void;
}

const VALUE_LABELS: Record<Exclude<EditableKind, 'add_negative_keywords'>, string> = {
  set_campaign_budget: 'New daily budget',
  set_target_cpa: 'New target CPA',
  set_target_roas: 'New target ROAS (%)',
};

/**
 * Edit, then approve (docs/api.md): untick negative keywords or change their match type, or
 * change a budget or target value. Only proposed keywords are listed, so nothing can be added;
 * the service classifies the edited version again and records both.
 */
export function EditForm(props: EditFormProps) {
  const { action } = props;
  const [error, setError] = useState<string | null>(null);
  const [sending, setSending] = useState(false);
  const idBase = `edit-${action.id}`;
  const form = useRef<HTMLDivElement>(null);
  // The Edit button that opened the form is disabled now: its first control takes the focus.
  useEffect(() => {
    form.current?.querySelector<HTMLElement>('input, select, textarea')?.focus();
  }, []);

  const submit = async (event: Event, edit: ActionEdit | null) => {
    event.preventDefault();
    if (edit === null) return;
    setError(null);
    setSending(true);
    const done = await props.onApproveEdited(edit);
    setSending(false);
    if (!done) setError('The edit was not approved; see the message above.');
  };

  const buttons = (
    <div class="decision">
      <button type="submit" disabled={sending}>Approve edited</button>
      <button type="button" class="button-quiet" onClick={props.onCancel}>Cancel edit</button>
    </div>
  );

  const changed = props.changedSince && (
    <p class="notice" role="alert">
      This action changed since you opened this form (edited elsewhere, or returned to the queue). Approving sends the edit of the
      version you started from, which the service refuses: cancel the edit, review the action as it is now and edit it again.
    </p>
  );
  const field = action.kind === 'add_negative_keywords' ? null : EDITABLE_FIELDS[action.kind];
  return (
    <div ref={form}>
      {changed}
      {action.kind === 'add_negative_keywords' || field === null
        ? <KeywordEdit idBase={idBase} proposed={(action.params.keywords ?? []) as Keyword[]} error={error} setError={setError} onSubmit={submit} buttons={buttons} />
        : <ValueEdit idBase={idBase} label={VALUE_LABELS[action.kind]} current={Number(action.params[field])} field={field} error={error} setError={setError} onSubmit={submit} buttons={buttons} />}
    </div>
  );
}

interface PartProps {
  readonly idBase: string;
  readonly error: string | null;
  readonly setError: (error: string | null) => void;
  readonly onSubmit: (event: Event, edit: ActionEdit | null) => void;
  readonly buttons: ComponentChildren;
}

function KeywordEdit(props: PartProps & { proposed: readonly Keyword[] }) {
  const [rows, setRows] = useState(props.proposed.map((keyword) => ({ ...keyword, keep: true })));
  const change = (index: number, patch: Partial<(typeof rows)[number]>) => setRows(rows.map((row, i) => (i === index ? { ...row, ...patch } : row)));
  const edit = (): ActionEdit | null => {
    const kept = rows.filter((row) => row.keep).map(({ text, match_type }) => ({ text, match_type }));
    if (kept.length === 0) {
      props.setError('Keep at least one keyword; to apply none of them, reject the action.');
      return null;
    }
    return { keywords: kept };
  };
  return (
    <form class="edit-form" aria-label="Edit before approving" onSubmit={(event) => props.onSubmit(event, edit())}>
      <fieldset>
        <legend>Keywords to add as negatives</legend>
        <p class="muted">Untick a keyword to leave it out, or change its match type. Keywords cannot be added here.</p>
        <ul class="plain-list edit-keywords">
          {rows.map((row, index) => (
            // By position: the same text may be proposed twice, with two match types.
            <li key={index}>
              <label class="inline">
                <input type="checkbox" checked={row.keep} onChange={(event) => change(index, { keep: (event.currentTarget as HTMLInputElement).checked })} />
                <span>Keep "<Untrusted text={row.text} />"</span>
              </label>
              <label class="visually-hidden" for={`${props.idBase}-match-${index}`}>Match type of "{revealHiddenCharacters(String(row.text))}"</label>
              <select id={`${props.idBase}-match-${index}`} value={row.match_type} disabled={!row.keep}
                onChange={(event) => change(index, { match_type: (event.currentTarget as HTMLSelectElement).value as Keyword['match_type'] })}>
                {MATCH_TYPES.map((type) => <option key={type} value={type}>{type}</option>)}
              </select>
            </li>
          ))}
        </ul>
      </fieldset>
      <p class="field-error" role="alert">{props.error ?? ''}</p>
      {props.buttons}
    </form>
  );
}

function ValueEdit(props: PartProps & { label: string; current: number; field: 'daily_budget' | 'target_cpa' | 'target_roas_pct' }) {
  const [text, setText] = useState(String(props.current));
  const inputId = `${props.idBase}-value`;
  const edit = (): ActionEdit | null => {
    const value = Number(text.trim());
    if (text.trim() === '' || !Number.isFinite(value) || value <= 0) {
      props.setError('Enter a number above 0.');
      return null;
    }
    return { [props.field]: value };
  };
  return (
    <form class="edit-form" aria-label="Edit before approving" onSubmit={(event) => props.onSubmit(event, edit())}>
      <label for={inputId}>{props.label}</label>
      <input id={inputId} type="text" inputMode="decimal" autoComplete="off" value={text} aria-invalid={props.error !== null}
        onInput={(event) => setText((event.currentTarget as HTMLInputElement).value)} />
      <p class="muted">Proposed: {props.current.toLocaleString()}. The policy classifies the new value again before it is approved.</p>
      <p class="field-error" role="alert">{props.error ?? ''}</p>
      {props.buttons}
    </form>
  );
}
