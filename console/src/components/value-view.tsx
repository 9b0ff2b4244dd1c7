import { Fragment } from 'preact';
import { revealHiddenCharacters } from '../text/hidden-characters.ts';
import { Untrusted } from './untrusted-text.tsx';

/** Shows a JSON value readably: scalars inline, records as a definition list, the rest as JSON. */
export function ValueView(props: { value: unknown }) {
  const { value } = props;
  if (value === null || value === undefined) return <span class="muted">—</span>;
  if (typeof value === 'number') return <span>{value.toLocaleString()}</span>;
  if (typeof value === 'string' || typeof value === 'boolean') return <span><Untrusted text={String(value)} /></span>;
  if (Array.isArray(value) && value.length === 0) return <span class="muted">none</span>;
  if (Array.isArray(value) && value.every((item) => item === null || typeof item !== 'object')) {
    return <span>{value.map((item, index) => <Fragment key={index}>{index > 0 && ', '}<Untrusted text={String(item ?? '')} /></Fragment>)}</span>;
  }
  if (!Array.isArray(value) && typeof value === 'object') {
    return (
      <dl class="pairs">
        {Object.entries(value as Record<string, unknown>).map(([name, inner]) => (
          <div key={name}>
            <dt><Untrusted text={name.replace(/_/g, ' ')} /></dt>
            <dd><ValueView value={inner} /></dd>
          </div>
        ))}
      </dl>
    );
  }
  return <JsonBlock value={value} />;
}

export function JsonBlock(props: { value: unknown; label?: string }) {
  // Strings inside may hold bidirectional control characters: shown as markers, never obeyed.
  const json = JSON.stringify(props.value, null, 2) as string | undefined;
  const text = json === undefined ? '' : revealHiddenCharacters(json);
  return <pre class="json" tabIndex={0} aria-label={props.label === undefined ? undefined : revealHiddenCharacters(props.label)}>{text}</pre>;
}

/** The parameters of an action; negative keyword lists as a table. */
export function ActionParams(props: { params: Record<string, unknown> }) {
  const { keywords, ...rest } = props.params;
  const keywordRows = Array.isArray(keywords) ? (keywords as { text?: unknown; match_type?: unknown }[]) : null;
  return (
    <>
      {Object.keys(rest).length > 0 && <ValueView value={rest} />}
      {keywordRows && (
        <table class="keywords">
          <caption>Keywords</caption>
          <thead><tr><th scope="col">Keyword</th><th scope="col">Match type</th></tr></thead>
          <tbody>
            {keywordRows.map((keyword, index) => (
              <tr key={index}><td><Untrusted text={String(keyword.text ?? '')} /></td><td><Untrusted text={String(keyword.match_type ?? '')} /></td></tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
