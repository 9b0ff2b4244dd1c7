import { AppError, ErrorKind } from '../../errors/app-error.ts';

export class InvalidCustomerIdError extends AppError {
  readonly kind = ErrorKind.Validation;

  constructor(flag: string) {
    super('invalid-customer-id', `${flag} must be a Google Ads customer id: ten digits, with or without dashes (123-456-7890)`);
  }
}

/** "123-456-7890" or "1234567890" -> "1234567890"; anything else is refused, never guessed at. */
export function normaliseCustomerId(text: string, flag = 'customer id'): string {
  const trimmed = text.trim();
  if (!/^(\d{3}-\d{3}-\d{4}|\d{10})$/.test(trimmed)) throw new InvalidCustomerIdError(flag);
  return trimmed.replace(/-/g, '');
}
