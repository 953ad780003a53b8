/**
 * RFC 6749 §3.1.2.3 and RFC 9700 §2.1: a redirect URI is compared with the registered ones by exact string
 * match. The one exception is RFC 8252 §7.3: a native app listening on a loopback IP literal gets an
 * ephemeral port, so for `http://127.0.0.1` and `http://[::1]` the port may differ and everything else
 * (scheme, host, path, query) must still match exactly.
 */
export function matchRedirectUri(registered: readonly string[], presented: string): string | null {
  if (registered.includes(presented)) return presented;
  const loopback = withoutLoopbackPort(presented);
  if (loopback === null) return null;
  return registered.find((uri) => withoutLoopbackPort(uri) === loopback) ?? null;
}

const LOOPBACK = /^http:\/\/(127\.0\.0\.1|\[::1\])(?::(\d{1,5}))?(\/[^#]*)?$/;

/** The URI with its port removed, if it is a loopback IP literal URI with a valid port; else null. */
function withoutLoopbackPort(uri: string): string | null {
  const match = LOOPBACK.exec(uri);
  if (!match) return null;
  if (match[2] !== undefined && Number(match[2]) > 65535) return null;
  return `http://${match[1]}${match[3] ?? ''}`;
}

/** Appends response parameters to a redirect URI's query (RFC 6749 §4.1.2: keep the existing query). */
export function withQuery(uri: string, params: Readonly<Record<string, string | undefined>>): string {
  const url = new URL(uri);
  for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.append(name, value);
  return url.toString();
}
