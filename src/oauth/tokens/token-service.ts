import type { Config } from '../../config/config.js';
import type { ClientRecord } from '../../storage/clients.js';
import type { Db } from '../../storage/dialect.js';
import { newId } from '../../storage/ids.js';
import type { GrantStore } from '../../storage/grant-store.js';
import { TurnBatch } from '../../storage/turn-batch.js';
import type { KeyStore } from '../keys/key-store.js';
import { generateLookupToken, LOOKUP_TOKEN, tokenLookupKey } from '../secrets.js';
import {
  findAccessTokenByHash,
  findAccessTokenByJti,
  isAccessTokenListedRevoked,
  listRevokedAccessToken,
  markAccessTokenRevoked,
  type AccessTokenRow,
} from './access-token-records.js';
import { InvalidTokenError } from './invalid-token-error.js';
import { signJwtAccessToken, verifyJwtAccessToken, type AccessTokenClaims } from './jwt-access-token.js';
import { clampAccessTokenTtl } from './lifetime.js';
import { VerifiedTokenCache } from './verified-token-cache.js';
import type { SubjectType, VerifiedToken } from './verified-token.js';

export interface IssueAccessTokenInput {
  client: ClientRecord;
  subject: string;
  subjectType: SubjectType;
  scopes: string[];
  grantType: string;
  /** The user's grant the token belongs to (authorization_codes/refresh_tokens/device_codes); null for client credentials. */
  grantId?: string | null;
}

export interface IssuedAccessToken {
  accessToken: string;
  tokenType: 'Bearer';
  expiresIn: number;
  /** Space-separated, as RFC 6749 §3.3 spells a scope. */
  scope: string;
  jti: string;
}

export interface TokenServiceOptions {
  db: Db;
  config: Config;
  keys: KeyStore;
  /** Milliseconds since the epoch; tests move time. */
  clock?: () => number;
  /** Told of each access token issued, by grant type (metrics). */
  onIssued?: (grantType: string) => void;
}

/**
 * Issues and verifies access tokens of both formats. An opaque token, and every token of a user's grant,
 * has an `access_tokens` row: the row is what a revocation marks (one token, a grant, a user's, a
 * client's). A client-credentials JWT is self-contained: nothing is stored when it is issued, and what can
 * end it early is kept apart — its registration's `revocations` count, which the token carries (checked with
 * the registration, pipeline/authenticate.ts), and `revoked_access_tokens` for a token revoked by itself.
 * Verified tokens are cached so that a hot token costs neither a signature check nor a database read, and
 * revocation evicts from that cache.
 */
export class TokenService {
  readonly #db: Db;
  readonly #config: Config;
  readonly #keys: KeyStore;
  readonly #clock: () => number;
  readonly #onIssued: ((grantType: string) => void) | undefined;
  readonly #cache: VerifiedTokenCache;
  /** Token rows of one event-loop turn share one commit. */
  readonly #rows: TurnBatch;
  /** Concurrent verifications of the same uncached token share one signature check and one read. */
  readonly #inFlight = new Map<string, Promise<VerifiedToken>>();

  constructor(options: TokenServiceOptions) {
    this.#db = options.db;
    this.#config = options.config;
    this.#keys = options.keys;
    this.#clock = options.clock ?? Date.now;
    this.#onIssued = options.onIssued;
    this.#cache = new VerifiedTokenCache(options.config.tokens.cacheSize, this.#clock);
    this.#rows = new TurnBatch(options.db);
  }

  /**
   * A client-credentials token. An opaque token's row is committed in the commit this event-loop turn's
   * tokens share; a JWT is stored nowhere, but its registration is read there too. Resolves once that is
   * done; rejects with BatchCommitError when the commit failed and with StaleRegistrationError (nothing
   * stored, nothing to answer) when the client's registration changed since `input.client` was read.
   */
  async issueAccessToken(input: IssueAccessTokenInput): Promise<IssuedAccessToken> {
    const prepared = await this.#prepare(input);
    const { client } = input;
    const guard = { clientRegistrationId: client.id, updatedAt: client.updatedAt, revocations: client.revocations };
    const rows = prepared.row === null ? [] : [{ table: 'accessTokens' as const, row: prepared.row }];
    // The registration is read (and an opaque token's row committed) at the end of the turn.
    const [accessToken] = await Promise.all([prepared.token, this.#rows.write(rows, guard)]);
    return { ...prepared.issued, accessToken };
  }

  /**
   * The token and the row that makes it valid, not yet stored: a user grant stores the row in the
   * transaction that checks the grant under the user's lock (grants/grant-commit.ts), and signs before it
   * begins.
   */
  async signAccessToken(input: IssueAccessTokenInput & { grantId: string }): Promise<{ issued: IssuedAccessToken; row: AccessTokenRow }> {
    const prepared = await this.#prepare(input);
    if (prepared.row === null) throw new Error('A token of a user grant has a row');
    return { issued: { ...prepared.issued, accessToken: await prepared.token }, row: prepared.row };
  }

  /** The token (being signed) and its row; no row for a self-contained token (a client-credentials JWT). */
  async #prepare(input: IssueAccessTokenInput): Promise<{ issued: Omit<IssuedAccessToken, 'accessToken'>; token: Promise<string>; row: AccessTokenRow | null }> {
    const { client, subject, subjectType, grantType } = input;
    this.#onIssued?.(grantType);
    const scope = [...new Set(input.scopes)].join(' ');
    const expiresIn = clampAccessTokenTtl(client.accessTokenTtl);
    const iat = Math.floor(this.#clock() / 1000);
    const exp = iat + expiresIn;
    const jti = newId();
    let token: Promise<string>;
    let tokenHash: string | null = null;
    const selfContained = client.accessTokenFormat === 'jwt' && subjectType === 'client';
    if (client.accessTokenFormat === 'jwt') {
      const key = await this.#keys.signingKey();
      const issuer = this.#config.issuer;
      const claims: AccessTokenClaims = { iss: issuer, aud: issuer, sub: subject, client_id: client.clientId, jti, scope, iat, exp };
      if (selfContained) {
        claims.reg = client.id;
        claims.rev = client.revocations;
      }
      token = signJwtAccessToken(claims, key);
    } else {
      const opaque = generateLookupToken(this.#clock());
      tokenHash = tokenLookupKey(opaque);
      token = Promise.resolve(opaque);
    }
    const issued = { tokenType: 'Bearer' as const, expiresIn, scope, jti };
    if (selfContained) return { issued, token, row: null };
    const row: AccessTokenRow = {
      jti,
      tokenHash,
      format: client.accessTokenFormat,
      clientId: client.clientId,
      clientRegistrationId: client.id,
      subject,
      subjectType,
      scopes: scope,
      grantType,
      issuedAt: toIso(iat),
      expiresAt: toIso(exp),
      revokedAt: null,
      grantId: input.grantId ?? null,
    };
    return { issued, token, row };
  }

  /**
   * Runs a user grant's transaction (grants/grant-commit.ts) where this turn's token rows are committed:
   * on SQLite inside their shared commit, on PostgreSQL in a transaction of its own (turn-batch.ts).
   */
  transact<T>(work: (store: GrantStore) => Promise<T>): Promise<T> {
    return this.#rows.transact(work);
  }

  /** The token as verified before, while it is cached and unexpired; null means "call verifyAccessToken". */
  cachedAccessToken(token: string): VerifiedToken | null {
    return token.length > this.#config.tokens.maxTokenLength ? null : this.#cache.get(token);
  }

  /** Resolves to the token's record or rejects with InvalidTokenError; storage failures propagate as they are. */
  verifyAccessToken(token: string): Promise<VerifiedToken> {
    // Checked before anything else, so an oversized header costs no parsing and no lookup.
    if (token.length > this.#config.tokens.maxTokenLength) return Promise.reject(new InvalidTokenError('too long'));
    const cached = this.cachedAccessToken(token);
    if (cached) return Promise.resolve(cached);
    let pending = this.#inFlight.get(token);
    if (!pending) {
      pending = this.#verifyUncached(token).finally(() => this.#inFlight.delete(token));
      this.#inFlight.set(token, pending);
    }
    return pending;
  }

  /**
   * Ends one token: marks its row, or lists a self-contained token's jti until its expiry (every instance
   * reads either on a cache miss, and follows the invalidation the change records), and evicts it here.
   */
  async revokeToken(token: VerifiedToken): Promise<void> {
    const now = new Date(this.#clock()).toISOString();
    if (token.clientRevocations === null) await markAccessTokenRevoked(this.#db.kysely, token.jti, now);
    else await listRevokedAccessToken(this.#db.kysely, token.jti, toIso(token.expiresAt));
    this.#cache.evictJti(token.jti);
  }

  /** For a revocation announced by another instance: the row is already marked. */
  evictJti(jti: string): void {
    this.#cache.evictJti(jti);
  }

  /** Drops cached tokens the predicate selects (they are verified against the database again). */
  evictWhere(predicate: (token: VerifiedToken) => boolean): number {
    return this.#cache.evictWhere(predicate);
  }

  /** Every cached token issued to the client, its users' tokens included. */
  evictClient(clientId: string): number {
    return this.#cache.evictWhere((token) => token.clientId === clientId);
  }

  /** Every cached token of one user grant (a replayed code, a reused refresh token, a revoked family). */
  evictGrant(grantId: string): number {
    return this.#cache.evictWhere((token) => token.grantId === grantId);
  }

  /** E.g. a deactivated user: that user's cached tokens stop being served at once. */
  evictSubject(subject: string, subjectType: SubjectType = 'user'): number {
    return this.#cache.evictWhere((token) => token.subject === subject && token.subjectType === subjectType);
  }

  async #verifyUncached(token: string): Promise<VerifiedToken> {
    const generation = this.#cache.generation;
    const now = this.#clock();
    const verified = token.includes('.') ? await this.#verifyJwt(token, now) : await this.#verifyOpaque(token, now);
    // An eviction that happened while this verification read the row may have been about this token.
    if (this.#cache.generation === generation && now < verified.expiresAt * 1000) this.#cache.set(token, verified);
    return verified;
  }

  async #verifyJwt(token: string, now: number): Promise<VerifiedToken> {
    const { issuer, tokens } = this.#config;
    const claims = await verifyJwtAccessToken(token, { keys: this.#keys, issuer, clockSkew: tokens.clockSkew, now });
    if (claims.reg !== undefined) return this.#verifySelfContained(claims);
    const row = await findAccessTokenByJti(this.#db.kysely, claims.jti);
    if (!row) throw new InvalidTokenError('no record');
    if (row.format !== 'jwt' || row.clientId !== claims.client_id || row.subject !== claims.sub || row.scopes !== claims.scope) {
      throw new InvalidTokenError('record mismatch');
    }
    if (row.revokedAt !== null) throw new InvalidTokenError('revoked');
    return toVerifiedToken(row, claims.iat, claims.exp);
  }

  /** A client-credentials JWT: its claims are the record; only a revocation of its own is looked up. */
  async #verifySelfContained(claims: AccessTokenClaims): Promise<VerifiedToken> {
    // Client credentials only: the client is the subject.
    if (claims.sub !== claims.client_id) throw new InvalidTokenError('claims mismatch');
    if (await isAccessTokenListedRevoked(this.#db.kysely, claims.jti)) throw new InvalidTokenError('revoked');
    return Object.freeze({
      jti: claims.jti,
      format: 'jwt',
      clientId: claims.client_id,
      clientRegistrationId: claims.reg!,
      subject: claims.sub,
      subjectType: 'client',
      scopes: Object.freeze(claims.scope.split(' ').filter((scope) => scope !== '')) as string[],
      grantType: 'client_credentials',
      grantId: null,
      clientRevocations: claims.rev!,
      issuedAt: claims.iat,
      expiresAt: claims.exp,
    });
  }

  async #verifyOpaque(token: string, now: number): Promise<VerifiedToken> {
    if (!LOOKUP_TOKEN.test(token)) throw new InvalidTokenError('malformed');
    const row = await findAccessTokenByHash(this.#db.kysely, tokenLookupKey(token));
    if (!row || row.format !== 'opaque') throw new InvalidTokenError('unknown');
    if (row.revokedAt !== null) throw new InvalidTokenError('revoked');
    const issuedAt = toEpoch(row.issuedAt);
    const expiresAt = toEpoch(row.expiresAt);
    // The same skew as for JWTs: the expiry was computed on whichever instance issued the token.
    if (now >= (expiresAt + this.#config.tokens.clockSkew) * 1000) throw new InvalidTokenError('expired');
    return toVerifiedToken(row, issuedAt, expiresAt);
  }
}

function toVerifiedToken(row: AccessTokenRow, issuedAt: number, expiresAt: number): VerifiedToken {
  const scopes = Object.freeze(row.scopes.split(' ').filter((scope) => scope !== '')) as string[];
  return Object.freeze({
    jti: row.jti,
    format: row.format as VerifiedToken['format'],
    clientId: row.clientId,
    clientRegistrationId: row.clientRegistrationId,
    subject: row.subject,
    subjectType: row.subjectType as SubjectType,
    scopes,
    grantType: row.grantType,
    grantId: row.grantId,
    clientRevocations: null,
    issuedAt,
    expiresAt,
  });
}

/** ISO text of whole seconds, the last few kept: every token issued in one second shares its two times. */
const isoBySecond = new Map<number, string>();

function toIso(epochSeconds: number): string {
  let iso = isoBySecond.get(epochSeconds);
  if (iso === undefined) {
    if (isoBySecond.size >= 16) isoBySecond.clear();
    iso = new Date(epochSeconds * 1000).toISOString();
    isoBySecond.set(epochSeconds, iso);
  }
  return iso;
}

function toEpoch(iso: string): number {
  return Math.floor(Date.parse(iso) / 1000);
}
