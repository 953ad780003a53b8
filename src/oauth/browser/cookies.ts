/**
 * The cookies the sign-in pages use, named and flagged in one place. Over https they carry the `__Host-`
 * prefix (RFC 6265bis §4.1.3.2: Secure, Path=/, no Domain — a sibling subdomain cannot plant one); over
 * plain http, which the configuration allows only outside production, they cannot be Secure.
 */
export interface CookieJar {
  /** Binds interactions and form tokens to one browser. */
  readonly browser: string;
  /** The sign-in session. */
  readonly session: string;
  /** Marks a browser that signed in to an account before (known-devices.ts). */
  readonly device: string;
  readonly secure: boolean;
}

export function cookieJar(issuer: string): CookieJar {
  const secure = issuer.startsWith('https://');
  const prefix = secure ? '__Host-' : '';
  return { browser: `${prefix}portcullis-browser`, session: `${prefix}portcullis-session`, device: `${prefix}portcullis-device`, secure };
}

const COOKIE_VALUE = /^[A-Za-z0-9_-]{1,128}$/;

/**
 * One cookie's value from a Cookie header, or null when it is absent, malformed or sent twice (two values
 * under one name mean a cookie was planted beside ours; neither is trusted).
 */
export function readCookie(header: string | undefined, name: string): string | null {
  if (header === undefined) return null;
  let found: string | null = null;
  for (const pair of header.split(';')) {
    const separator = pair.indexOf('=');
    if (separator < 0 || pair.slice(0, separator).trim() !== name) continue;
    if (found !== null) return null;
    found = pair.slice(separator + 1).trim();
  }
  return found !== null && COOKIE_VALUE.test(found) ? found : null;
}

/**
 * A Set-Cookie value: HttpOnly (no script reads it), SameSite=Lax (sent on top-level navigations from the
 * client's site to /oauth/authorize, never on cross-site subrequests or form posts), Path=/.
 */
export function serializeCookie(jar: CookieJar, name: string, value: string, maxAgeSeconds: number | null): string {
  const parts = [`${name}=${value}`, 'Path=/', 'HttpOnly', 'SameSite=Lax'];
  if (jar.secure) parts.push('Secure');
  if (maxAgeSeconds !== null) parts.push(`Max-Age=${maxAgeSeconds}`);
  return parts.join('; ');
}

export function expireCookie(jar: CookieJar, name: string): string {
  return serializeCookie(jar, name, '', 0);
}
