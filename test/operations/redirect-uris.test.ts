import { describe, expect, it } from 'vitest';
import { classifyRedirectUri } from '../../src/operations/redirect-uris.js';

describe('classifyRedirectUri', () => {
  it('tells web, loopback and private-use redirect URIs apart (RFC 8252 §7.1, §7.3)', () => {
    expect(
      [
        'https://app.example.com/cb',
        'https://app.example.com:8443/cb?x=1',
        'HTTPS://App.Example.com/cb',
        'http://127.0.0.1/cb',
        'http://127.0.0.1:51004/cb',
        'http://[::1]:8080/cb',
        'com.example.app:/oauth2redirect',
        'com.example.app://callback',
      ].map((uri) => [uri, classifyRedirectUri(uri)]),
    ).toEqual([
      ['https://app.example.com/cb', { kind: 'web' }],
      ['https://app.example.com:8443/cb?x=1', { kind: 'web' }],
      ['HTTPS://App.Example.com/cb', { kind: 'web' }],
      ['http://127.0.0.1/cb', { kind: 'loopback' }],
      ['http://127.0.0.1:51004/cb', { kind: 'loopback' }],
      ['http://[::1]:8080/cb', { kind: 'loopback' }],
      ['com.example.app:/oauth2redirect', { kind: 'private-use' }],
      ['com.example.app://callback', { kind: 'private-use' }],
    ]);
  });

  it('names the problem of every other URI', () => {
    const http = 'may use http only on the loopback addresses 127.0.0.1 and [::1] (not localhost)';
    const scheme = 'must use https, http on a loopback address, or a private-use scheme such as com.example.app';
    const cases: [string, string][] = [
      ['/cb', 'must be an absolute URI'],
      ['app.example.com/cb', 'must be an absolute URI'],
      ['https://app.example.com/c b', 'must be an absolute URI'],
      ['https://app.example.com/caf\u00e9', 'must be an absolute URI'],
      ['https://:443/cb', 'must be an absolute URI'],
      ['https://app.example.com/cb#', 'must not have a fragment'],
      ['com.example.app:/cb#x', 'must not have a fragment'],
      ['https://*.example.com/cb', 'must not contain a wildcard: redirect URIs are matched exactly'],
      ['https://@app.example.com/cb', 'must not contain user information'],
      ['com.example.app://user@host/cb', 'must not contain user information'],
      ['https:///cb', 'must name a host'],
      ['https:/app.example.com/cb', 'must name a host'],
      ['http://app.example.com/cb', http],
      ['http://localhost/cb', http],
      ['http://127.0.0.2/cb', http],
      ['http://0x7f.0.0.1/cb', http],
      ['http://[0:0:0:0:0:0:0:1]/cb', http],
      ['http:/127.0.0.1/cb', http],
      ['javascript:alert(1)', scheme],
      ['data:text/html,hi', scheme],
      ['file:///etc/passwd', scheme],
      ['ws://127.0.0.1/cb', scheme],
      ['myapp:/cb', scheme],
    ];
    expect(cases.map(([uri]) => [uri, classifyRedirectUri(uri)])).toEqual(cases.map(([uri, problem]) => [uri, { problem }]));
  });
});
