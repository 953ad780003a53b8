import { describe, expect, it } from 'vitest';
import { addressKey } from '../../src/limits/address-key.js';

describe('addressKey: the budget an address draws on', () => {
  it('keeps an IPv4 address as it is', () => {
    expect(addressKey('192.0.2.7')).toBe('192.0.2.7');
    expect(addressKey('127.0.0.1')).toBe('127.0.0.1');
  });

  it('reads an IPv4-mapped IPv6 address as its IPv4 address', () => {
    expect(addressKey('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(addressKey('::ffff:c000:207')).toBe('192.0.2.7');
  });

  it('puts every address of one IPv6 /64 in one budget, and different /64s in different ones', () => {
    const keys = ['2001:db8:1:2::1', '2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:0db8:0001:0002:0:0:0:9', '2001:db8:1:2:a:b:c:d%eth0'].map(addressKey);
    expect(new Set(keys)).toEqual(new Set(['2001:db8:1:2::/64']));
    expect(addressKey('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
    expect(addressKey('fe80::1:2:3:4')).toBe('fe80:0:0:0::/64');
  });

  it('leaves anything that is not an IP address as it is', () => {
    expect(addressKey('')).toBe('');
    expect(addressKey('/run/portcullis.sock')).toBe('/run/portcullis.sock');
  });
});
