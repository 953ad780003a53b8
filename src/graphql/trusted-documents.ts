import { hash } from 'node:crypto';
import fs from 'node:fs';

/** A request whose document is not one of the trusted documents (answered 400 `PERSISTED_QUERY_NOT_FOUND`). */
export class PersistedQueryNotFoundError extends Error {
  readonly code = 'PERSISTED_QUERY_NOT_FOUND';

  constructor(message: string) {
    super(message);
    this.name = 'PersistedQueryNotFoundError';
  }
}

/** The trusted-documents file is unusable: the server does not start with it. */
export class TrustedDocumentsFileError extends Error {
  constructor(file: string, problems: readonly string[]) {
    super(`${file}: ${problems.join('; ')}`);
    this.name = 'TrustedDocumentsFileError';
  }
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

const sha256 = (document: string): string => hash('sha256', document, 'hex');

/**
 * Trusted documents (GRAPHQL_TRUSTED_DOCUMENTS): only the operations a file lists run. The file maps the
 * SHA-256 of each document (lowercase hex) to the document; every entry is checked when it is loaded, so a
 * listed hash always names exactly the text that runs. A request names its document by
 * `extensions.persistedQuery.sha256Hash` (the Apollo convention, which client libraries send), with or
 * without the text; text alone is accepted when its hash is listed. Anything else is refused before it is
 * parsed, which is the point: nothing but reviewed documents reaches the parser.
 */
export class TrustedDocuments {
  readonly #documents: ReadonlyMap<string, string>;

  private constructor(documents: ReadonlyMap<string, string>) {
    this.#documents = documents;
  }

  static load(file: string): TrustedDocuments {
    let parsed: unknown;
    try {
      parsed = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (error) {
      throw new TrustedDocumentsFileError(file, [error instanceof Error ? error.message : String(error)]);
    }
    return TrustedDocuments.from(parsed, file);
  }

  static from(entries: unknown, source = 'trusted documents'): TrustedDocuments {
    if (typeof entries !== 'object' || entries === null || Array.isArray(entries)) {
      throw new TrustedDocumentsFileError(source, ['must be a JSON object mapping SHA-256 hashes (hex) to documents']);
    }
    const problems: string[] = [];
    const documents = new Map<string, string>();
    for (const [key, document] of Object.entries(entries)) {
      if (!SHA256_HEX.test(key)) problems.push(`"${key.slice(0, 80)}" is not a lowercase hex SHA-256`);
      else if (typeof document !== 'string') problems.push(`${key}: the document must be a string`);
      else if (sha256(document) !== key) problems.push(`${key}: the document's SHA-256 is ${sha256(document)}`);
      else documents.set(key, document);
    }
    if (problems.length > 0) throw new TrustedDocumentsFileError(source, problems);
    if (documents.size === 0) throw new TrustedDocumentsFileError(source, ['lists no document']);
    return new TrustedDocuments(documents);
  }

  get size(): number {
    return this.#documents.size;
  }

  /** The document the request may run; PersistedQueryNotFoundError when it names none of the trusted ones. */
  resolve(query: unknown, extensions: unknown): string {
    const named = persistedQueryHash(extensions);
    if (named !== null) {
      const document = this.#documents.get(named);
      if (document === undefined) throw new PersistedQueryNotFoundError('The persisted query is not one of the trusted documents.');
      if (query !== undefined && query !== null && query !== document) {
        throw new PersistedQueryNotFoundError('The query text is not the trusted document its sha256Hash names.');
      }
      return document;
    }
    if (typeof query === 'string' && this.#documents.get(sha256(query)) === query) return query;
    throw new PersistedQueryNotFoundError('Only trusted documents run here: send extensions.persistedQuery.sha256Hash of a listed document.');
  }
}

/** `extensions.persistedQuery.sha256Hash`, or null when the request names no hash; a malformed one names none that is listed. */
function persistedQueryHash(extensions: unknown): string | null {
  if (typeof extensions !== 'object' || extensions === null) return null;
  const persisted = (extensions as { persistedQuery?: unknown }).persistedQuery;
  if (typeof persisted !== 'object' || persisted === null) return null;
  const value = (persisted as { sha256Hash?: unknown }).sha256Hash;
  if (value === undefined) return null;
  // Compared as given: a hash in capitals, or anything not a hash, matches no key of the (lowercase) list.
  return typeof value === 'string' ? value : '';
}
