import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PersistedQueryNotFoundError, TrustedDocuments, TrustedDocumentsFileError } from '../../src/graphql/trusted-documents.js';

const ME = '{ me { id name } }';
const POST = 'query Post($id: ID!) { post(id: $id) { id title } }';
const hashOf = (document: string) => createHash('sha256').update(document).digest('hex');
const persisted = (sha256Hash: unknown) => ({ persistedQuery: { version: 1, sha256Hash } });

function trusted(): TrustedDocuments {
  return TrustedDocuments.from({ [hashOf(ME)]: ME, [hashOf(POST)]: POST });
}

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(PersistedQueryNotFoundError);
    expect((error as PersistedQueryNotFoundError).code).toBe('PERSISTED_QUERY_NOT_FOUND');
    return (error as Error).message;
  }
  throw new Error('expected a refusal');
}

describe('trusted documents', () => {
  it('runs a listed document named by its hash, with or without the text, and listed text alone', () => {
    const documents = trusted();
    expect(documents.resolve(undefined, persisted(hashOf(ME)))).toBe(ME);
    expect(documents.resolve(POST, persisted(hashOf(POST)))).toBe(POST);
    expect(documents.resolve(ME, undefined)).toBe(ME);
  });

  it('refuses a hash not listed, text not listed, text that is not the document its hash names, and no document at all', () => {
    const documents = trusted();
    expect(refusal(() => documents.resolve(undefined, persisted(hashOf('{ users { nodes { email } } }'))))).toBe('The persisted query is not one of the trusted documents.');
    expect(refusal(() => documents.resolve('{ users { nodes { email } } }', undefined))).toBe(
      'Only trusted documents run here: send extensions.persistedQuery.sha256Hash of a listed document.',
    );
    expect(refusal(() => documents.resolve('{ users { nodes { email } } }', persisted(hashOf(ME))))).toBe('The query text is not the trusted document its sha256Hash names.');
    expect(refusal(() => documents.resolve(undefined, undefined))).toContain('Only trusted documents run here');
    // Listed text with one byte more is another document.
    expect(refusal(() => documents.resolve(`${ME} `, undefined))).toContain('Only trusted documents run here');
  });

  it('matches hashes exactly: no capitals, prefixes, non-strings or prototype keys', () => {
    const documents = trusted();
    for (const hash of [hashOf(ME).toUpperCase(), hashOf(ME).slice(0, 32), 42, ['x'], '__proto__', 'constructor', 'hasOwnProperty']) {
      expect(refusal(() => documents.resolve(undefined, persisted(hash)))).toBe('The persisted query is not one of the trusted documents.');
    }
    expect(refusal(() => documents.resolve('__proto__', { persistedQuery: null }))).toContain('Only trusted documents run here');
  });

  it('refuses to load a file whose entries do not hash to their keys, are not documents, or that lists none', () => {
    const wrong = hashOf('{ me { id } }');
    expect(() => TrustedDocuments.from({ [wrong]: ME })).toThrow(new TrustedDocumentsFileError('trusted documents', [`${wrong}: the document's SHA-256 is ${hashOf(ME)}`]));
    expect(() => TrustedDocuments.from({ [hashOf(ME).toUpperCase()]: ME })).toThrow(/is not a lowercase hex SHA-256/);
    expect(() => TrustedDocuments.from({ [hashOf(ME)]: { query: ME } })).toThrow(/the document must be a string/);
    expect(() => TrustedDocuments.from({})).toThrow(/lists no document/);
    expect(() => TrustedDocuments.from([ME])).toThrow(/must be a JSON object/);
  });

  it('loads the file once, and names it when it cannot', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'trusted-'));
    const file = path.join(dir, 'documents.json');
    fs.writeFileSync(file, JSON.stringify({ [hashOf(ME)]: ME }));
    const documents = TrustedDocuments.load(file);
    fs.rmSync(file);
    expect(documents.size).toBe(1);
    expect(documents.resolve(undefined, persisted(hashOf(ME)))).toBe(ME);
    expect(() => TrustedDocuments.load(file)).toThrow(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: ENOENT`));
    fs.writeFileSync(file, '{ not json');
    expect(() => TrustedDocuments.load(file)).toThrow(TrustedDocumentsFileError);
    fs.rmSync(dir, { recursive: true });
  });
});
