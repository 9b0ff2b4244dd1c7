import { randomBytes } from 'node:crypto';
import { connectGoogleAdsAccount } from '../../src/operator/connect-google-ads.ts';
import type { PlatformAccountRef } from '../../src/platform/ads-platform.ts';
import type { Infrastructure } from '../../src/runtime/infrastructure.ts';
import type { FakeGoogleAds } from './fake-google-ads/fake-google-ads-server.ts';

/** A fixed CREDENTIALS_KEY per test process. */
export const TEST_CREDENTIALS_KEY = randomBytes(32).toString('base64');

/** The service environment for a fake: its URLs, client, developer token and a credentials key. */
export function googleAdsEnv(fake: FakeGoogleAds): Record<string, string> {
  return { ...fake.env(), CREDENTIALS_KEY: TEST_CREDENTIALS_KEY };
}

/** Connects a Google Ads account to the fake's customer, as `adsagent account create --platform google-ads` does. */
export async function connectFakeAccount(
  infra: Infrastructure,
  fake: FakeGoogleAds,
  workspaceId: string,
  options: { customerId?: string; loginCustomerId?: string; name?: string } = {},
): Promise<{ accountId: string; refreshToken: string; ref: PlatformAccountRef }> {
  const customerId = options.customerId ?? '1234567890';
  if (!fake.accounts.has(customerId)) fake.seed(customerId);
  const refreshToken = fake.issueRefreshToken();
  const { value } = await connectGoogleAdsAccount(infra, {
    workspaceId,
    name: options.name ?? 'Acme Outdoor (Google Ads)',
    customerId,
    loginCustomerId: options.loginCustomerId,
    refreshToken,
  });
  const ref: PlatformAccountRef = {
    accountId: value.id,
    name: options.name ?? 'Acme Outdoor (Google Ads)',
    platform: 'google-ads',
    sandboxSeed: null,
    googleAds: { customer_id: customerId, login_customer_id: options.loginCustomerId?.replace(/-/g, '') ?? null },
  };
  return { accountId: value.id, refreshToken, ref };
}
