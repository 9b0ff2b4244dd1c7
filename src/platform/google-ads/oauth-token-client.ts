import type { GoogleAdsConfig } from '../../config/config.ts';
import { AppError, ErrorKind } from '../../errors/app-error.ts';
import { PlatformUnavailableError } from '../platform-errors.ts';
import { platformText } from './google-ads-errors.ts';

export interface AccessToken {
  readonly token: string;
  /** Epoch milliseconds at which Google stops accepting it. */
  readonly expiresAt: number;
}

/** The token endpoint refused the refresh token or the client (invalid_grant, invalid_client, ...). */
export class OAuthGrantRefusedError extends AppError {
  readonly kind = ErrorKind.Validation;
  readonly oauthError: string;

  constructor(oauthError: string, description: string) {
    super('oauth-grant-refused', `${oauthError}${description ? `: ${description}` : ''}`);
    this.oauthError = oauthError;
  }
}

export class OAuthClientNotConfiguredError extends AppError {
  readonly kind = ErrorKind.Unavailable;

  constructor() {
    super('oauth-client-not-configured', 'GOOGLE_ADS_CLIENT_ID and GOOGLE_ADS_CLIENT_SECRET must be set to use Google Ads accounts');
  }
}

const TOKEN_TIMEOUT_MS = 15_000;

/**
 * Exchanges a refresh token for an access token (RFC 6749 §6) at GOOGLE_OAUTH_TOKEN_URL.
 * 4xx answers are the grant's fault (OAuthGrantRefusedError); network errors and 5xx are
 * Google's (PlatformUnavailableError, retryable). Neither error carries the refresh token.
 */
export async function exchangeRefreshToken(config: GoogleAdsConfig, refreshToken: string, signal?: AbortSignal): Promise<AccessToken> {
  if (!config.clientId || !config.clientSecret) throw new OAuthClientNotConfiguredError();
  const body = new URLSearchParams({
    grant_type: 'refresh_token',
    client_id: config.clientId,
    client_secret: config.clientSecret,
    refresh_token: refreshToken,
  });
  const started = Date.now();
  let response: Response;
  try {
    response = await fetch(config.oauthTokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body,
      signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(TOKEN_TIMEOUT_MS)]) : AbortSignal.timeout(TOKEN_TIMEOUT_MS),
    });
  } catch (error) {
    throw new PlatformUnavailableError(`the OAuth token endpoint cannot be reached: ${(error as Error).name}`, { cause: error });
  }
  const payload = (await response.json().catch(() => ({}))) as Record<string, unknown>;
  if (response.status >= 500) throw new PlatformUnavailableError(`the OAuth token endpoint answered HTTP ${response.status}`);
  if (!response.ok) {
    throw new OAuthGrantRefusedError(platformText(payload.error) || `http_${response.status}`, platformText(payload.error_description));
  }
  const token = payload.access_token;
  const expiresIn = Number(payload.expires_in);
  if (typeof token !== 'string' || token === '' || !Number.isFinite(expiresIn) || expiresIn <= 0) {
    throw new PlatformUnavailableError('the OAuth token endpoint answered without an access_token and expires_in');
  }
  return { token, expiresAt: started + expiresIn * 1000 };
}
