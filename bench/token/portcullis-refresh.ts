/**
 * The refresh scenario on Portcullis: each connection's first refresh token comes from the real
 * authorization code + PKCE flow — /oauth/authorize, the sign-in page (the bench client is first-party, so
 * no consent page), the code redeemed at /oauth/token — as a person and a client would get it; nothing is
 * minted by writing rows behind the server's back, since a refresh token's stored form belongs to its
 * grant. `portcullisRefreshUnavailable` still probes for both endpoints, so that a server without them is
 * reported with the reason rather than failing the run.
 */
import { mintRefreshToken, type Page } from './authorization-code.js';
import { basicAuthorization, BENCH_USER, REDIRECT_URI, REFRESH_CLIENT, SCOPE } from '../servers/token-clients.js';

const TOKEN_PATH = '/oauth/token';
const AUTHORIZE_PATH = '/oauth/authorize';

/** null when the scenario can run; otherwise why it cannot. */
export async function portcullisRefreshUnavailable(base: string): Promise<string | null> {
  const probe = await fetch(new URL(TOKEN_PATH, base), {
    method: 'POST',
    headers: { authorization: basicAuthorization(REFRESH_CLIENT), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'bench-probe-not-a-token' }),
  });
  const { error } = (await probe.json()) as { error?: string };
  if (error === 'unsupported_grant_type') return 'the token endpoint does not implement grant_type=refresh_token';
  const authorize = await fetch(new URL(`${AUTHORIZE_PATH}?client_id=${REFRESH_CLIENT}`, base), { redirect: 'manual' });
  await authorize.body?.cancel();
  if (authorize.status === 404) return `no ${AUTHORIZE_PATH} to mint a first refresh token`;
  return null;
}

/** The bench user's authorization code + PKCE flow through /oauth/authorize; resolves to the refresh token. */
export function mintPortcullisRefreshToken(base: string): Promise<string> {
  return mintRefreshToken({
    base,
    authorizePath: AUTHORIZE_PATH,
    tokenPath: TOKEN_PATH,
    clientId: REFRESH_CLIENT,
    authorization: basicAuthorization(REFRESH_CLIENT),
    redirectUri: REDIRECT_URI,
    scope: `offline_access ${SCOPE}`,
    answerPage: answerPortcullisPage,
  });
}

/**
 * Submits the page's first form: hidden fields as they are, an email or username field with the bench
 * user's email, a password field with the password, and the first submit button's name and value (the
 * "allow" of a consent page, by convention listed first).
 */
export async function answerPortcullisPage(page: Page): Promise<{ url: URL; init: RequestInit }> {
  const form = /<form\b([^>]*)>([\s\S]*?)<\/form>/i.exec(page.html);
  if (!form) throw new Error(`${page.url.pathname} shows no form`);
  const action = attribute(form[1]!, 'action') ?? page.url.pathname + page.url.search;
  const fields = new URLSearchParams();
  let submitted = false;
  for (const [tag] of form[2]!.matchAll(/<(input|button)\b[^>]*>/gi)) {
    const name = attribute(tag, 'name');
    const type = (attribute(tag, 'type') ?? (tag.toLowerCase().startsWith('<button') ? 'submit' : 'text')).toLowerCase();
    if (!name) continue;
    if (type === 'submit') {
      if (!submitted) fields.append(name, attribute(tag, 'value') ?? '');
      submitted = true;
    } else if (type === 'password') fields.append(name, BENCH_USER.password);
    else if (type === 'email' || /email|username|login/i.test(name)) fields.append(name, BENCH_USER.email);
    else fields.append(name, attribute(tag, 'value') ?? '');
  }
  return {
    url: new URL(action, page.url),
    init: { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: fields.toString() },
  };
}

function attribute(tag: string, name: string): string | null {
  const match = new RegExp(`\\b${name}\\s*=\\s*("([^"]*)"|'([^']*)')`, 'i').exec(tag);
  return match ? (match[2] ?? match[3] ?? '').replace(/&amp;/g, '&') : null;
}
