// A public OAuth 2.0 / OpenID Connect client running in the browser: authorization code with PKCE
// (RFC 7636, S256), `state` (RFC 6749 §10.12) and `iss` (RFC 9207) checked on every authorization
// response, `nonce` checked in every ID token. Tokens live in this module's memory only: never in Web
// Storage, never in a URL. It gets no refresh token; it renews with prompt=none in a hidden iframe.

// The PKCE verifier, state and nonce of a sign-in in progress must survive the top-level round trip to the
// authorization server and back, which unloads the page: they alone wait in sessionStorage, and the
// callback removes them before it does anything else. A silent renewal keeps them in memory.
const PENDING_KEY = 'example-app:pending-sign-in';
const SILENT_RENEWAL_TIMEOUT_MS = 10000;

export class OAuthError extends Error {
  constructor(error, description) {
    super(description ? `${error}: ${description}` : error);
    this.error = error;
  }
}

function base64url(bytes) {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function randomString() {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

async function s256(verifier) {
  return base64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
}

function jwtClaims(jwt) {
  const payload = jwt.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(payload), (c) => c.charCodeAt(0))));
}

export class OAuthClient {
  #config;
  #metadata;
  #session = null;
  #tokensReceived = 0;

  constructor(config, metadata) {
    this.#config = config;
    this.#metadata = metadata;
  }

  static async load() {
    const config = await (await fetch('/config.json')).json();
    const metadata = await (await fetch(`${config.issuer}/.well-known/openid-configuration`)).json();
    // RFC 8414 §3.3: the metadata must name the issuer it was fetched from.
    if (metadata.issuer !== config.issuer) throw new Error('The discovery document names another issuer.');
    if (metadata.authorization_response_iss_parameter_supported !== true) throw new Error('The issuer does not send iss.');
    return new OAuthClient(config, metadata);
  }

  /** What the app shows: who is signed in and the current access token's scope, never the token. */
  get session() {
    return this.#session && { subject: this.#session.subject, scope: this.#session.scope, number: this.#tokensReceived };
  }

  async beginSignIn() {
    const pending = { state: randomString(), nonce: randomString(), verifier: randomString() };
    const url = await this.#authorizationUrl(pending, this.#config.redirectUri, {});
    sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
    location.assign(url);
  }

  /** The redirect back to /callback: `params` is its query, already gone from the address bar. */
  async completeSignIn(params) {
    const stored = sessionStorage.getItem(PENDING_KEY);
    sessionStorage.removeItem(PENDING_KEY);
    if (stored === null) throw new Error('No sign-in is in progress.');
    await this.#accept(params, JSON.parse(stored), this.#config.redirectUri);
  }

  /**
   * prompt=none in a hidden iframe: the authorization server answers with a redirect (never a page) to
   * /silent-callback, which hands its query to this window with postMessage. The server's pages cannot be
   * framed (frame-ancestors 'none', X-Frame-Options: DENY), but Chromium applies both to the document a
   * frame ends up showing, not to the 303s on the way (which carry X-Frame-Options too), and that document
   * is this app's own. The iframe carries the server's SameSite=Lax session cookie only because the app and
   * the server are the same site (127.0.0.1, another port); an app on another site would renew with a
   * top-level redirect instead.
   */
  async renewSilently() {
    const pending = { state: randomString(), nonce: randomString(), verifier: randomString() };
    const url = await this.#authorizationUrl(pending, this.#config.silentRedirectUri, { prompt: 'none' });
    const params = await new Promise((resolve, reject) => {
      const frame = document.createElement('iframe');
      frame.hidden = true;
      const timer = setTimeout(() => finish(new Error('The silent renewal timed out.')), SILENT_RENEWAL_TIMEOUT_MS);
      function onMessage(event) {
        if (event.origin !== location.origin || event.source !== frame.contentWindow) return;
        finish(null, new URLSearchParams(event.data));
      }
      function finish(error, value) {
        clearTimeout(timer);
        window.removeEventListener('message', onMessage);
        frame.remove();
        if (error) reject(error);
        else resolve(value);
      }
      window.addEventListener('message', onMessage);
      frame.src = url;
      document.body.append(frame);
    });
    await this.#accept(params, pending, this.#config.silentRedirectUri);
  }

  /** OpenID Connect RP-Initiated Logout 1.0 §2; the tokens are dropped before the page unloads. */
  signOut() {
    const url = new URL(this.#metadata.end_session_endpoint);
    url.search = new URLSearchParams({
      id_token_hint: this.#session?.idToken ?? '',
      post_logout_redirect_uri: this.#config.postLogoutRedirectUri,
    }).toString();
    this.#session = null;
    location.assign(url);
  }

  /** A cross-origin API call with the in-memory access token. */
  async callApi(path) {
    if (!this.#session) throw new Error('Not signed in.');
    const res = await fetch(`${this.#config.issuer}${path}`, { headers: { authorization: `Bearer ${this.#session.accessToken}` } });
    return { status: res.status, body: await res.json() };
  }

  async #authorizationUrl(pending, redirectUri, extra) {
    const url = new URL(this.#metadata.authorization_endpoint);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: this.#config.clientId,
      redirect_uri: redirectUri,
      scope: this.#config.scope,
      state: pending.state,
      nonce: pending.nonce,
      code_challenge: await s256(pending.verifier),
      code_challenge_method: 'S256',
      ...extra,
    }).toString();
    return url;
  }

  async #accept(params, pending, redirectUri) {
    if (params.get('state') !== pending.state) throw new Error('The answer does not match the request (state).');
    if (params.get('iss') !== this.#metadata.issuer) throw new Error('The answer comes from another issuer (iss).');
    if (params.has('error')) throw new OAuthError(params.get('error'), params.get('error_description'));
    const res = await fetch(this.#metadata.token_endpoint, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code: params.get('code') ?? '',
        redirect_uri: redirectUri,
        client_id: this.#config.clientId,
        code_verifier: pending.verifier,
      }),
    });
    const tokens = await res.json();
    if (!res.ok) throw new OAuthError(tokens.error, tokens.error_description);
    const claims = jwtClaims(tokens.id_token);
    // The ID token came straight from the token endpoint (OpenID Connect Core §3.1.3.7 item 6); it must be
    // for this app and this request.
    if (claims.iss !== this.#metadata.issuer || claims.aud !== this.#config.clientId || claims.nonce !== pending.nonce) {
      throw new Error('The ID token is not for this sign-in.');
    }
    this.#tokensReceived += 1;
    this.#session = { accessToken: tokens.access_token, idToken: tokens.id_token, scope: tokens.scope, subject: claims.sub };
  }
}
