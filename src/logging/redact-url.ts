/**
 * Query parameters that carry credentials. The server refuses every one of them in a URL (tokens go in the
 * Authorization header, secrets in the body), but the request line is logged before that refusal, and a
 * log is read by more people than the database. A name is compared after percent-decoding, lower-casing
 * and dropping everything but letters and digits, and matches when it contains one of these words, so
 * `access_token`, `Access-Token`, `access_token%20` and `ACCESS%5FTOKEN` are all masked; a few harmless
 * parameters masked too (a `postcode`) cost nothing.
 */
const CREDENTIAL_WORDS = ['token', 'secret', 'password', 'passwd', 'pass', 'pwd', 'code', 'assertion', 'apikey', 'key', 'credential', 'auth', 'session', 'signature', 'bearer', 'jwt'];

export const REDACTED = '[REDACTED]';

function isCredentialName(raw: string): boolean {
  let name: string;
  try {
    name = decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    name = raw;
  }
  const letters = name.toLowerCase().replace(/[^a-z0-9]/g, '');
  return CREDENTIAL_WORDS.some((word) => letters.includes(word));
}

/**
 * The URL with the value of every credential-like parameter replaced: in the query (`&` or `;` separated,
 * however many `?` start it) and in `;name=value` path parameters, which some servers read as credentials.
 */
export function redactUrl(original: string): string {
  // An absolute-form request target (RFC 9112 §3.2.2) may carry user:password@ before the host.
  const url = original.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#@]*@/i, `$1${REDACTED}@`);
  const start = url.search(/[?;]/);
  if (start === -1) return url;
  const rest = url.slice(start).replace(/([?&;]+)([^?&;=]*)(=?)([^?&;]*)/g, (whole, separator: string, name: string, eq: string) =>
    isCredentialName(name) ? `${separator}${name}=${REDACTED}` : whole,
  );
  return url.slice(0, start) + rest;
}
