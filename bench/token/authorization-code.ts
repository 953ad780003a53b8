/**
 * A first refresh token the way a client gets one: the authorization code flow with PKCE (RFC 6749 §4.1,
 * RFC 7636 S256), driven like a browser — redirects followed with the cookies the server set, and any page
 * on the way (sign-in, consent) answered by `answerPage` — then the code exchanged at the token endpoint.
 */
import { createHash, randomBytes } from 'node:crypto';

export interface CodeFlow {
  /** http://127.0.0.1:port */
  base: string;
  authorizePath: string;
  tokenPath: string;
  clientId: string;
  /** The client's Basic credentials (client_secret_basic). */
  authorization: string;
  redirectUri: string;
  scope: string;
  /** Fills in and submits a page the browser is shown on the way; omitted, a page ends the flow with an error. */
  answerPage?: (page: Page) => Promise<{ url: URL; init: RequestInit }>;
}

export interface Page {
  url: URL;
  html: string;
}

/** Redirects and pages a flow may pass through before it reaches the redirect URI. */
const MAX_STEPS = 10;

export async function mintRefreshToken(flow: CodeFlow): Promise<string> {
  const verifier = randomBytes(32).toString('base64url');
  const state = randomBytes(16).toString('base64url');
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: flow.clientId,
    redirect_uri: flow.redirectUri,
    scope: flow.scope,
    state,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    // OpenID Connect Core §11: offline_access is granted only with an explicit consent prompt.
    prompt: 'consent',
  });
  const callback = await browse(flow, new URL(`${flow.authorizePath}?${query}`, flow.base));
  if (callback.searchParams.get('state') !== state) throw new Error(`state mismatch at ${callback.href}`);
  const code = callback.searchParams.get('code');
  if (!code) throw new Error(`no code: ${callback.searchParams.get('error') ?? callback.href}`);
  const response = await fetch(new URL(flow.tokenPath, flow.base), {
    method: 'POST',
    headers: { authorization: flow.authorization, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: flow.redirectUri, code_verifier: verifier }),
  });
  const body = (await response.json()) as { refresh_token?: string; error?: string };
  if (!body.refresh_token) throw new Error(`code exchange gave no refresh token: ${response.status} ${JSON.stringify(body)}`);
  return body.refresh_token;
}

/** Follows the flow until it redirects to the client's redirect URI, and returns that URL. */
async function browse(flow: CodeFlow, start: URL): Promise<URL> {
  const cookies = new Map<string, string>();
  let next: { url: URL; init: RequestInit } = { url: start, init: {} };
  for (let step = 0; step < MAX_STEPS; step++) {
    const headers = new Headers(next.init.headers);
    if (cookies.size > 0) headers.set('cookie', [...cookies].map(([name, value]) => `${name}=${value}`).join('; '));
    const response = await fetch(next.url, { ...next.init, headers, redirect: 'manual' });
    for (const cookie of response.headers.getSetCookie()) {
      const [pair] = cookie.split(';', 1);
      const equals = pair!.indexOf('=');
      cookies.set(pair!.slice(0, equals), pair!.slice(equals + 1));
    }
    const location = response.headers.get('location');
    if (location) {
      await response.body?.cancel();
      const target = new URL(location, next.url);
      if (target.href.startsWith(flow.redirectUri)) return target;
      // Only this machine is ever contacted: the issuer in an absolute Location may name another host.
      next = { url: new URL(target.pathname + target.search, flow.base), init: {} };
      continue;
    }
    const html = await response.text();
    if (response.status !== 200 || !flow.answerPage) throw new Error(`${next.url.pathname} answered ${response.status}: ${html.slice(0, 200)}`);
    next = await flow.answerPage({ url: next.url, html });
  }
  throw new Error(`no redirect to ${flow.redirectUri} after ${MAX_STEPS} steps`);
}
