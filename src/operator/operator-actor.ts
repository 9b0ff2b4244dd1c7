import type { Actor } from '../events/envelope.ts';
import { clipText } from '../text/clip-text.ts';
import { sanitizeText } from '../text/hostile-text.ts';

/**
 * Who an operator command is recorded as: the login name ($USER), or 'operator' when it is
 * unset or empty (a container, a cron job); cut and cleaned to what an event's actor id may
 * hold, so no environment makes every write command fail its event's schema.
 */
export function operatorActor(user: string | undefined = process.env.USER): Actor {
  const id = clipText(sanitizeText((user ?? '').trim()), 200);
  return { kind: 'operator', id: id === '' ? 'operator' : id };
}
