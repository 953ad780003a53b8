import { hash } from 'node:crypto';

/** A strong entity tag over the exact bytes of a representation (RFC 9110 §8.8.3). */
export function entityTag(payload: string | Buffer): string {
  return `"${hash('sha256', payload, 'base64url').slice(0, 27)}"`;
}

/** If-None-Match uses the weak comparison, If-Match the strong one (RFC 9110 §13.1.1, §13.1.2). */
export function matchesAny(header: string | undefined, tag: string, weak: boolean): boolean {
  if (header === undefined) return false;
  if (header.trim() === '*') return true;
  const strip = (t: string) => (weak ? t.replace(/^W\//, '') : t);
  return header.split(',').some((candidate) => {
    const trimmed = candidate.trim();
    if (!weak && trimmed.startsWith('W/')) return false;
    return strip(trimmed) === strip(tag);
  });
}
