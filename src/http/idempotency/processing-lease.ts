/**
 * How long a claim protects a request being processed. A POST /runs finishes in well under
 * this (its read barrier waits 3 s at most), so a claim still held after it belongs to a
 * process that died, and a retry takes the request over (same run id, never a second run).
 */
export const PROCESSING_LEASE_SECONDS = 10;
