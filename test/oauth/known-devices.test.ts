import { describe, expect, it } from 'vitest';
import { cookieJar } from '../../src/oauth/browser/cookies.js';
import { KNOWN_DEVICE_SECONDS, KnownDevices } from '../../src/oauth/browser/known-devices.js';

const SECRET = 'test-key-encryption-secret-0123456789abcdef';
const NOW = Date.parse('2026-11-23T12:00:00Z');
/** The account's credential stamp (user-credentials.ts): it changes with the password. */
const STAMP = 'stamp-of-the-current-password';

/** The Cookie header a browser sends back for a Set-Cookie. */
function cookieOf(setCookie: string): string {
  return setCookie.split(';')[0]!;
}

describe('known-device cookies', () => {
  const jar = cookieJar('https://auth.example');

  it('are HttpOnly, SameSite=Lax, __Host- and Secure over https, and live 90 days', () => {
    const setCookie = new KnownDevices(SECRET, jar, () => NOW).remember('owner@example.com', STAMP);
    expect(setCookie).toMatch(/^__Host-portcullis-device=[0-9a-f]{8}[A-Za-z0-9_-]{65}; Path=\/; HttpOnly; SameSite=Lax; Secure; Max-Age=7776000$/);
    expect(KNOWN_DEVICE_SECONDS).toBe(90 * 86400);
    const plain = cookieJar('http://127.0.0.1:3000');
    expect(new KnownDevices(SECRET, plain, () => NOW).remember('owner@example.com', STAMP)).toMatch(/^portcullis-device=[A-Za-z0-9_-]{73}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=7776000$/);
  });

  it('recognize the account they were issued for, regardless of case, and give each device its own id', () => {
    const devices = new KnownDevices(SECRET, jar, () => NOW);
    const first = cookieOf(devices.remember('Owner@Example.com', STAMP));
    const second = cookieOf(devices.remember('owner@example.com', STAMP));
    const id = devices.recognize(`a=1; ${first}`, ' owner@EXAMPLE.com', STAMP);
    expect(id).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(devices.recognize(second, 'owner@example.com', STAMP)).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(devices.recognize(second, 'owner@example.com', STAMP)).not.toBe(id);
  });

  it('prove nothing for another account, when tampered with, expired, keyed otherwise, doubled or absent', () => {
    let now = NOW;
    const devices = new KnownDevices(SECRET, jar, () => now);
    const cookie = cookieOf(devices.remember('owner@example.com', STAMP));
    const [name, value] = cookie.split('=') as [string, string];
    expect(devices.recognize(cookie, 'someone-else@example.com', STAMP)).toBeNull();
    const flipped = `${value.slice(0, -1)}${value.endsWith('A') ? 'B' : 'A'}`;
    expect(devices.recognize(`${name}=${flipped}`, 'owner@example.com', STAMP)).toBeNull();
    // A later expiry written into the cookie breaks its HMAC.
    expect(devices.recognize(`${name}=ffffffff${value.slice(8)}`, 'owner@example.com', STAMP)).toBeNull();
    expect(devices.recognize(`${name}=${value.slice(1)}`, 'owner@example.com', STAMP)).toBeNull();
    expect(new KnownDevices('another-key-encryption-secret-0123456789', jar, () => now).recognize(cookie, 'owner@example.com', STAMP)).toBeNull();
    expect(devices.recognize(`${cookie}; ${cookie}`, 'owner@example.com', STAMP)).toBeNull();
    expect(devices.recognize(undefined, 'owner@example.com', STAMP)).toBeNull();
    expect(devices.recognize('__Host-portcullis-session=abc', 'owner@example.com', STAMP)).toBeNull();
    now = NOW + KNOWN_DEVICE_SECONDS * 1000 - 1000;
    expect(devices.recognize(cookie, 'owner@example.com', STAMP)).not.toBeNull();
    now = NOW + KNOWN_DEVICE_SECONDS * 1000;
    expect(devices.recognize(cookie, 'owner@example.com', STAMP)).toBeNull();
  });

  it('end with a password change: a cookie issued under another credential stamp, or for no account, proves nothing', () => {
    const devices = new KnownDevices(SECRET, jar, () => NOW);
    const cookie = cookieOf(devices.remember('owner@example.com', STAMP));
    expect(devices.recognize(cookie, 'owner@example.com', STAMP)).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(devices.recognize(cookie, 'owner@example.com', 'stamp-of-the-next-password')).toBeNull();
    expect(devices.recognize(cookie, 'owner@example.com', null)).toBeNull();
    expect({ presented: devices.presented(cookie), absent: devices.presented('a=1') }).toEqual({ presented: true, absent: false });
  });
});
