import { describe, expect, it } from 'vitest';
import { auditableClientId, auditableResourceId } from '../../src/audit/audit-event.js';

describe('ids taken from a request into an audit record', () => {
  it('keeps a resource id of the contract shape: 1 to 64 of A-Z a-z 0-9 _ -', () => {
    for (const id of ['a', '01a21a97cb119a47d67bb4b4fedf0c70', 'A_b-9', 'x'.repeat(64)]) expect(auditableResourceId(id)).toBe(id);
  });

  it('records null for anything else a caller can put in a path', () => {
    for (const id of [undefined, '', 'x'.repeat(65), 'a b', 'a/b', 'a.b', 'é', 'a\nb', "1' or '1'='1", '\u0000']) expect(auditableResourceId(id)).toBeNull();
  });

  it('keeps a client_id of 1 to 128 of A-Z a-z 0-9 . _ - and nothing else', () => {
    expect(auditableClientId('portal.web-app_2')).toBe('portal.web-app_2');
    expect(auditableClientId('c'.repeat(128))).toBe('c'.repeat(128));
    for (const id of [null, undefined, '', 'c'.repeat(129), 'a:b', 'a b']) expect(auditableClientId(id)).toBeNull();
  });
});
