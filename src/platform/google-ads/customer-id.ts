import { ProblemError } from '../../errors/problem-error.ts';

export class InvalidCustomerIdError extends ProblemError {
  constructor(flag: string) {
    super({
      type: 'invalid-customer-id',
      status: 400,
      title: 'Invalid Google Ads customer id',
      detail: `${flag} must be a Google Ads customer id: ten digits, with or without dashes (123-456-7890)`,
    });
  }
}

/** "123-456-7890" or "1234567890" -> "1234567890"; anything else is refused, never guessed at. */
export function normaliseCustomerId(text: string, flag = 'customer id'): string {
  const trimmed = text.trim();
  if (!/^(\d{3}-\d{3}-\d{4}|\d{10})$/.test(trimmed)) throw new InvalidCustomerIdError(flag);
  return trimmed.replace(/-/g, '');
}
