import { controlMarker, splitBidiControls } from '../text/bidi-controls.ts';

/**
 * Text that came from the API (summaries, reasons, keywords, names, answers): isolated from
 * the text around it (<bdi>), so right-to-left text cannot reorder the sentence it sits in, and
 * with each bidirectional control character shown as a visible marker (⟨U+202E⟩) instead of
 * obeyed. Preact renders it as text, never as HTML.
 */
export function Untrusted(props: { text: unknown }) {
  const text = typeof props.text === 'string' ? props.text : String(props.text ?? '');
  const parts = splitBidiControls(text);
  if (parts.length === 1 && !parts[0]!.control) return <bdi>{text}</bdi>;
  return (
    <bdi>
      {parts.map((part, index) => part.control
        ? <span key={index} class="control-char" title="An invisible bidirectional control character, shown here">{controlMarker(part.text)}</span>
        : part.text)}
    </bdi>
  );
}
