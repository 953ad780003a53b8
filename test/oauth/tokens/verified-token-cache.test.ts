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

  it('gives a used entry one second chance: unused since, it is the next to go', () => {
    const cache = new VerifiedTokenCache(2, () => 1_500_000);
    cache.set('a', token('1'));
    cache.set('b', token('2'));
    cache.get('a');
    cache.get('b');
    // Both used: the scan clears both marks, then evicts the oldest, a.
    cache.set('c', token('3'));
    expect([cache.has('a'), cache.has('b'), cache.has('c')]).toEqual([false, true, true]);
    // b's mark was cleared and it was not used since: it goes before c, which was just used.
    cache.get('c');
    cache.set('d', token('4'));
    expect([cache.has('b'), cache.has('c'), cache.has('d')]).toEqual([false, true, true]);
    expect(cache.size).toBe(2);
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

  it('answers only for the exact string verified, even for another token with the same tail', () => {
    const cache = new VerifiedTokenCache(10, () => 0);
    const tail = 'x'.repeat(40);
    const victim = `header.victim-payload.${tail}`;
    const forged = `header.forged-payload.${tail}`;
    cache.set(victim, token('1', 'alice'));
    expect(cache.get(forged)).toBeNull();
    expect(cache.has(forged)).toBe(false);
    expect(cache.get(victim)?.subject).toBe('alice');
    // Verified too (by the signature check, not the cache), the other string takes the entry's place.
    cache.set(forged, token('2', 'mallory'));
    expect(cache.get(victim)).toBeNull();
    expect(cache.get(forged)?.subject).toBe('mallory');
    expect(cache.size).toBe(1);
    // Revoking the first jti leaves the entry that replaced it.
    cache.evictJti('1');
    expect(cache.get(forged)?.subject).toBe('mallory');
    cache.evictJti('2');
    expect(cache.size).toBe(0);
  });

  it('caches nothing with capacity 0', () => {
    const cache = new VerifiedTokenCache(0, () => 0);
    cache.set('a', token('1'));
    expect(cache.get('a')).toBeNull();
  });
});
