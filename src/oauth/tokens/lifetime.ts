/** Access-token lifetimes allowed by the seed document: 5 minutes to 1 hour. */
export const MIN_ACCESS_TOKEN_TTL = 300;
export const MAX_ACCESS_TOKEN_TTL = 3600;

/** A client's configured lifetime, forced into the allowed range. */
export function clampAccessTokenTtl(seconds: number): number {
  if (!Number.isFinite(seconds)) return MIN_ACCESS_TOKEN_TTL;
  return Math.min(MAX_ACCESS_TOKEN_TTL, Math.max(MIN_ACCESS_TOKEN_TTL, Math.floor(seconds)));
}
