import { hiddenCharacterMarker, splitHiddenCharacters } from '../text/hidden-characters.ts';

/**
 * Text that came from the API (summaries, reasons, keywords, names, answers): isolated from
 * the text around it (<bdi>), so right-to-left text cannot reorder the sentence it sits in, and
 * with each hidden character (bidirectional control, zero-width, tag; see hidden-characters.ts)
 * shown as a visible marker (⟨U+202E⟩) instead of obeyed or unseen. Preact renders it as text, never as HTML.
 */
export function Untrusted(props: { text: unknown }) {
  const text = typeof props.text === 'string' ? props.text : String(props.text ?? '');
  const parts = splitHiddenCharacters(text);
  if (parts.length === 1 && !parts[0]!.hidden) return <bdi>{text}</bdi>;
  return (
    <bdi>
      {parts.map((part, index) => part.hidden
        ? <span key={index} class="control-char" title="An invisible character (a bidirectional control, zero-width or tag character), shown here">{hiddenCharacterMarker(part.text)}</span>
        : part.text)}
    </bdi>
  );
}
