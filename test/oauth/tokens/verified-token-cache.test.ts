import { describe, expect, it } from 'vitest';
import { VerifiedTokenCache } from '../../../src/oauth/tokens/verified-token-cache.js';
import type { VerifiedToken } from '../../../src/oauth/tokens/verified-token.js';

function token(jti: string, subject = 'u1', expiresAt = 2000): VerifiedToken {
  return { jti, format: 'jwt', clientId: 'c', clientRegistrationId: 'r1', subject, subjectType: 'user', scopes: [], grantType: 'password', grantId: null, clientRevocations: null, issuedAt: 1000, expiresAt };
}

describe('verified-token cache', () => {
  it('is bounded and drops the least recently used entry', () => {
    const cache = new VerifiedTokenCache(2, () => 1_500_000);
    cache.set('a', token('1'));
    cache.set('b', token('2'));
    expect(cache.get('a')?.jti).toBe('1');
    cache.set('c', token('3'));
    expect(cache.size).toBe(2);
    expect(cache.get('b')).toBeNull();
    expect(cache.get('a')?.jti).toBe('1');
    expect(cache.get('c')?.jti).toBe('3');
  });

  it('drops an entry at the token expiry', () => {
    let now = 1_999_999;
    const cache = new VerifiedTokenCache(10, () => now);
    cache.set('a', token('1'));
    expect(cache.get('a')).not.toBeNull();
    now = 2_000_000;
    expect(cache.get('a')).toBeNull();
    expect(cache.size).toBe(0);
  });

  it('evicts by jti and by predicate, and counts evictions in its generation', () => {
    const cache = new VerifiedTokenCache(10, () => 0);
    cache.set('a', token('1', 'alice'));
    cache.set('b', token('2', 'bob'));
    cache.set('c', token('3', 'alice'));
    const before = cache.generation;
    cache.evictJti('2');
    expect(cache.get('b')).toBeNull();
    expect(cache.evictWhere((t) => t.subject === 'alice')).toBe(2);
    expect(cache.size).toBe(0);
    expect(cache.generation).toBe(before + 2);
  });

  it('holds every string verified for one jti, and evicting the jti drops them all', () => {
    const cache = new VerifiedTokenCache(10, () => 0);
    cache.set('sig-s', token('1'));
    cache.set('sig-n-minus-s', token('1'));
    cache.set('other', token('2'));
    cache.evictJti('1');
    expect(cache.get('sig-s')).toBeNull();
    expect(cache.get('sig-n-minus-s')).toBeNull();
    expect(cache.get('other')?.jti).toBe('2');
    expect(cache.size).toBe(1);
  });

  it('keeps the other strings of a jti when one of them leaves the LRU', () => {
    const cache = new VerifiedTokenCache(2, () => 0);
    cache.set('first', token('1'));
    cache.set('second', token('1'));
    cache.set('third', token('2'));
    expect(cache.get('first')).toBeNull();
    cache.evictJti('1');
    expect(cache.get('second')).toBeNull();
    expect(cache.get('third')?.jti).toBe('2');
  });

  it('caches nothing with capacity 0', () => {
    const cache = new VerifiedTokenCache(0, () => 0);
    cache.set('a', token('1'));
    expect(cache.get('a')).toBeNull();
  });
});
