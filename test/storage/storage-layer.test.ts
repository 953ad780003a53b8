import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { decodeCursor, encodeCursor } from '../../src/storage/paging.js';

const STORAGE = path.resolve(import.meta.dirname, '../../src/storage');
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm;

describe('src/storage/ knows no API', () => {
  it('imports neither the error registry, an adapter, the operations nor the HTTP framework: it reports, callers answer', () => {
    const files = fs
      .readdirSync(STORAGE, { withFileTypes: true, recursive: true })
      .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
      .map((entry) => path.join(entry.parentPath, entry.name));
    expect(files.length).toBeGreaterThan(10);
    const offending = files.flatMap((file) =>
      [...fs.readFileSync(file, 'utf8').matchAll(SPECIFIER)]
        .map(([, specifier]) => specifier!)
        .filter((specifier) => /\/(errors|rest|graphql|operations|pipeline)\//.test(specifier) || /^(fastify|@fastify\/|mercurius)/.test(specifier))
        .map((specifier) => `${path.relative(STORAGE, file)}: ${specifier}`),
    );
    expect(offending).toEqual([]);
  });

  it('decodes a cursor it issued, and answers null for anything else', () => {
    expect(decodeCursor(encodeCursor('01abc'))).toBe('01abc');
    for (const cursor of ['', 'not-base64-json', Buffer.from('[2,"01abc"]').toString('base64url'), Buffer.from('[1,"../x"]').toString('base64url'), Buffer.from('{}').toString('base64url')]) {
      expect(decodeCursor(cursor), cursor).toBeNull();
    }
  });
});
