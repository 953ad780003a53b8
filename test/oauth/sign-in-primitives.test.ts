import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { cookieJar, readCookie, serializeCookie } from '../../src/oauth/browser/cookies.js';
import { CsrfTokens } from '../../src/oauth/browser/csrf.js';
import { browserBinding } from '../../src/oauth/browser/sign-in-sessions.js';
import { isUnverifiableClient, needsConsent } from '../../src/oauth/authorize/consent-check.js';
import type { ClientRecord } from '../../src/storage/clients.js';
import type { ConsentRow } from '../../src/storage/consents.js';
import { displayUserCode, generateUserCode, normalizeUserCode, USER_CODE_ALPHABET } from '../../src/oauth/device/user-code.js';
import { OAuthError } from '../../src/oauth/oauth-error.js';
import { escapeHtml, html } from '../../src/oauth/pages/html.js';
import { checkPkce } from '../../src/oauth/pkce.js';
import { matchRedirectUri, withQuery } from '../../src/oauth/redirect-uri.js';

describe('redirect URI matching (RFC 6749 §3.1.2.3, RFC 8252 §7.3)', () => {
  const registered = ['https://app.example/cb', 'http://127.0.0.1:8080/cb', 'http://[::1]/native'];

  it('accepts only the exact registered string', () => {
    expect(matchRedirectUri(registered, 'https://app.example/cb')).toBe('https://app.example/cb');
    for (const near of [
      'https://app.example/cb/', 'https://APP.example/cb', 'https://app.example/CB', 'https://app.example/cb?x=1', 'https://app.example:8443/cb',
      'https://evil.app.example/cb', 'http://app.example/cb', 'https://app.example/cb#f', 'https://app.example.evil/cb',
    ]) {
      expect(matchRedirectUri(registered, near), near).toBeNull();
    }
  });

  it('lets the port of a loopback IP literal vary, and nothing else', () => {
    expect(matchRedirectUri(registered, 'http://127.0.0.1:51234/cb')).toBe('http://127.0.0.1:8080/cb');
    expect(matchRedirectUri(registered, 'http://127.0.0.1/cb')).toBe('http://127.0.0.1:8080/cb');
    expect(matchRedirectUri(registered, 'http://[::1]:40000/native')).toBe('http://[::1]/native');
    for (const near of ['http://127.0.0.1:51234/cb2', 'http://localhost:8080/cb', 'https://127.0.0.1:8080/cb', 'http://127.0.0.1:99999/cb', 'http://127.0.0.2:8080/cb']) {
      expect(matchRedirectUri(registered, near), near).toBeNull();
    }
  });

  it('adds response parameters to the existing query', () => {
    expect(withQuery('https://app.example/cb?tenant=a', { code: 'c', state: 's&t', iss: undefined })).toBe('https://app.example/cb?tenant=a&code=c&state=s%26t');
  });
});

describe('PKCE (RFC 7636 §4.6, S256 only)', () => {
  const verifier = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
  const challenge = createHash('sha256').update(verifier).digest('base64url');

  it('accepts the verifier of the challenge (the RFC 7636 Appendix B example)', () => {
    expect(challenge).toBe('E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM');
    expect(() => checkPkce(verifier, challenge)).not.toThrow();
    expect(() => checkPkce(undefined, null)).not.toThrow();
  });

  it.each([
    ['another verifier', `${verifier.slice(0, -1)}l`, challenge, 'The code_verifier does not match the code_challenge.'],
    ['no verifier for a challenge', undefined, challenge, 'code_verifier is required.'],
    ['a verifier without a challenge (downgrade)', verifier, null, 'The authorization request carried no code_challenge.'],
    ['a short verifier', 'a'.repeat(42), challenge, 'The code_verifier is malformed.'],
    ['the challenge as verifier (plain)', challenge, challenge, 'The code_verifier does not match the code_challenge.'],
  ])('refuses %s with invalid_grant', (_case, presented, stored, description) => {
    expect(() => checkPkce(presented, stored)).toThrow(new OAuthError('invalid_grant', description));
  });
});

describe('device user codes (RFC 8628 §6.1)', () => {
  it('draws eight letters from the twenty consonants and shows them as XXXX-XXXX', () => {
    for (let i = 0; i < 200; i++) {
      const code = generateUserCode();
      expect(code).toMatch(new RegExp(`^[${USER_CODE_ALPHABET}]{8}$`));
      expect(displayUserCode(code)).toBe(`${code.slice(0, 4)}-${code.slice(4)}`);
    }
    expect(USER_CODE_ALPHABET).toBe('BCDFGHJKLMNPQRSTVWXZ');
  });

  it('reads entries regardless of case, dash and spaces, and refuses anything else', () => {
    expect(normalizeUserCode('bcdf-ghjk')).toBe('BCDFGHJK');
    expect(normalizeUserCode(' BCDF GHJK ')).toBe('BCDFGHJK');
    expect(normalizeUserCode('BCDFGHJK')).toBe('BCDFGHJK');
    for (const bad of ['BCDF-GHJ', 'BCDF-GHJKL', 'ABCD-EFGH', 'BCDF-GHJ1', 'x'.repeat(40), '']) expect(normalizeUserCode(bad), bad).toBeNull();
  });
});

describe('page cookies and form tokens', () => {
  it('names cookies with __Host- and marks them Secure over https only', () => {
    const https = cookieJar('https://auth.example');
    expect(https).toEqual({ browser: '__Host-portcullis-browser', session: '__Host-portcullis-session', device: '__Host-portcullis-device', secure: true });
    expect(serializeCookie(https, https.session, 'v', 60)).toBe('__Host-portcullis-session=v; Path=/; HttpOnly; SameSite=Lax; Secure; Max-Age=60');
    const http = cookieJar('http://127.0.0.1:3000');
    expect(serializeCookie(http, http.browser, 'v', null)).toBe('portcullis-browser=v; Path=/; HttpOnly; SameSite=Lax');
  });

  it('trusts neither of two cookies under one name, nor a malformed value', () => {
    expect(readCookie('a=1; portcullis-session=abc_-9; b=2', 'portcullis-session')).toBe('abc_-9');
    expect(readCookie('portcullis-session=abc; portcullis-session=def', 'portcullis-session')).toBeNull();
    expect(readCookie('portcullis-session=a"b', 'portcullis-session')).toBeNull();
    expect(readCookie('xportcullis-session=abc', 'portcullis-session')).toBeNull();
    expect(readCookie(undefined, 'portcullis-session')).toBeNull();
  });

  it('sets a new browser binding only in answer to a GET or HEAD without one, never to a post', () => {
    const jar = cookieJar('https://auth.example');
    const present = browserBinding(jar, `${jar.browser}=existing_value-1`, 'GET');
    expect(present).toEqual({ browser: 'existing_value-1', presented: true, setCookie: null });
    expect(browserBinding(jar, `${jar.browser}=existing_value-1`, 'POST')).toEqual(present);
    for (const method of ['GET', 'HEAD']) {
      const fresh = browserBinding(jar, undefined, method);
      expect(fresh).toEqual({ browser: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), presented: false, setCookie: `${jar.browser}=${fresh.browser}; Path=/; HttpOnly; SameSite=Lax; Secure` });
    }
    expect(browserBinding(jar, undefined, 'POST')).toEqual({ browser: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), presented: false, setCookie: null });
  });

  it('asks every time for a public client on a loopback or private-use redirect URI (RFC 8252 §8.6), first-party or not', () => {
    const client = (type: 'public' | 'confidential', firstParty = false) => ({ type, firstParty }) as ClientRecord;
    const remembered: ConsentRow = { userId: 'u', clientRegistrationId: 'c', clientId: 'app', scopes: 'openid read:posts', grantedAt: '2026-01-01T00:00:00.000Z', declinedScopes: null };
    const scopes = ['read:posts'];
    for (const uri of ['http://127.0.0.1:5000/cb', 'http://[::1]/cb', 'com.example.app:/cb']) {
      expect({ uri, unverifiable: isUnverifiableClient(client('public'), uri) }).toEqual({ uri, unverifiable: true });
      expect(needsConsent(client('public'), uri, remembered, scopes, false)).toBe(true);
      expect(needsConsent(client('public', true), uri, null, scopes, false)).toBe(true);
      expect(needsConsent(client('confidential'), uri, remembered, scopes, false)).toBe(false);
    }
    expect(isUnverifiableClient(client('public'), 'https://spa.example/cb')).toBe(false);
    expect(needsConsent(client('public'), 'https://spa.example/cb', remembered, scopes, false)).toBe(false);
    expect(needsConsent(client('public', true), 'https://spa.example/cb', null, scopes, false)).toBe(false);
    expect(needsConsent(client('public'), 'https://spa.example/cb', remembered, ['write:posts'], false)).toBe(true);
    expect(needsConsent(client('confidential', true), 'https://app.example/cb', null, scopes, true)).toBe(true);
  });

  it('verifies a form token only for the browser and purpose it was issued for', () => {
    const csrf = new CsrfTokens('test-key-encryption-secret-0123456789abcdef');
    const token = csrf.issue('browser-1', 'consent:i1');
    expect(csrf.verify(token, 'browser-1', 'consent:i1')).toBe(true);
    expect(csrf.verify(token, 'browser-2', 'consent:i1')).toBe(false);
    expect(csrf.verify(token, 'browser-1', 'consent:i2')).toBe(false);
    expect(csrf.verify(token, null, 'consent:i1')).toBe(false);
    expect(csrf.verify(undefined, 'browser-1', 'consent:i1')).toBe(false);
    expect(csrf.verify(`${token}x`, 'browser-1', 'consent:i1')).toBe(false);
    expect(new CsrfTokens('another-key-encryption-secret-0123456789ab').verify(token, 'browser-1', 'consent:i1')).toBe(false);
  });

  it('escapes every interpolated value in pages', () => {
    expect(escapeHtml(`<script>"'&`)).toBe('&lt;script&gt;&quot;&#39;&amp;');
    expect(html`<input value="${'"><script>alert(1)</script>'}">`.markup).toBe('<input value="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;">');
  });
});
