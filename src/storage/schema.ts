import type { Generated } from 'kysely';

/**
 * Table shapes as Kysely sees them (camelCase; CamelCasePlugin maps to snake_case columns).
 * Timestamps are ISO-8601 UTC strings in both dialects so ordering and comparison behave the same.
 * Booleans are stored as 0/1 on SQLite: read them through `Boolean()`.
 */
export interface UsersTable {
  id: string;
  email: string;
  name: string;
  role: string;
  active: boolean | number;
  passwordHash: string;
  createdAt: string;
  updatedAt: string;
  /** Times the user's tokens were revoked (migration 009); never part of the user's representation. */
  revocations: Generated<number>;
}

/**
 * The API reads and writes posts and comments through their resource modules (src/resources/), which name
 * their tables and columns; these shapes type the code that fills the tables directly (tests, benchmarks).
 */
export interface PostsTable {
  id: string;
  authorId: string;
  title: string;
  body: string;
  status: string;
  createdAt: string;
  updatedAt: string;
}

export interface CommentsTable {
  id: string;
  postId: string;
  authorId: string;
  body: string;
  createdAt: string;
  updatedAt: string;
}

export interface ClientsTable {
  id: string;
  clientId: string;
  name: string;
  type: string;
  secretHash: string | null;
  redirectUris: string;
  grantTypes: string;
  scopes: string;
  /** The role a client acting on its own behalf (client credentials) holds; null for user-facing clients. */
  role: string | null;
  accessTokenFormat: string;
  accessTokenTtl: number;
  /** Requests per rate-limit window for this client; null: the server's RATE_LIMIT_MAX. */
  rateLimit: number | null;
  firstParty: boolean | number;
  legacy: boolean | number;
  createdAt: string;
  updatedAt: string;
  /** JSON array: where RP-initiated logout may send the browser back to. */
  postLogoutRedirectUris: string;
  /** RS256 (the default every OpenID Connect client can verify) or ES256. */
  idTokenSignedResponseAlg: string;
  /** How many times the client's tokens were revoked; a self-contained token carries the count it was issued under. */
  revocations: Generated<number>;
}

export interface SigningKeysTable {
  kid: string;
  alg: string;
  publicJwk: string;
  privateJwkEncrypted: string;
  /** When the key was made, and published. */
  createdAt: string;
  /** When it starts signing: a rotation publishes the new key ahead of this (key-store.ts). */
  activatesAt: string;
  /** The key's number among the keys of its algorithm (unique per algorithm). */
  generation: number;
  /** When a newer key takes (or took) over signing; the public part stays published until its tokens expire. */
  retiredAt: string | null;
}

export interface AccessTokensTable {
  jti: string;
  tokenHash: string | null;
  format: string;
  clientId: string;
  subject: string;
  subjectType: string;
  scopes: string;
  grantType: string;
  issuedAt: string;
  expiresAt: string;
  revokedAt: string | null;
  /** `clients.id` of the registration the token was issued to (null: its client was gone at migration). */
  clientRegistrationId: string | null;
  /** The user's grant the token came from (code exchange, device approval, refresh family); null for client credentials. */
  grantId: string | null;
}

/** Self-contained access tokens (client-credentials JWTs, which have no `access_tokens` row) revoked one by one. */
export interface RevokedAccessTokensTable {
  jti: string;
  /** The token's own expiry: after it the entry is purged. */
  expiresAt: string;
}

/** Uses of deprecated REST operations and GraphQL fields, per client (migration 011). */
export interface DeprecatedUsesTable {
  id: string;
  /** '' for requests without a token. */
  clientId: string;
  interface: 'rest' | 'graphql';
  /** The REST operationId or the GraphQL `Type.field`. */
  name: string;
  /** bigint on PostgreSQL: the driver returns it as text. */
  uses: number | string;
  firstUsedAt: string;
  lastUsedAt: string;
}

/** A browser's sign-in; `id` is the SHA-256 digest of the session cookie. */
export interface LoginSessionsTable {
  id: string;
  userId: string;
  authTime: string;
  createdAt: string;
  expiresAt: string;
  revokedAt: string | null;
}

/** An authorization or device request waiting for the user; `id` is the digest of the id the browser holds. */
export interface InteractionsTable {
  id: string;
  /** Digest of the browser cookie the interaction was started with: another browser cannot continue it. */
  browserHash: string;
  kind: string;
  /** JSON: the validated request. */
  params: string;
  createdAt: string;
  expiresAt: string;
  completedAt: string | null;
}

export interface ConsentsTable {
  userId: string;
  clientRegistrationId: string;
  clientId: string;
  /** Space-separated, sorted. */
  scopes: string;
  grantedAt: string;
  /** The scopes asked for that the user left unticked when consenting; null when none were (migration 018). */
  declinedScopes: string | null;
}

export interface AuthorizationCodesTable {
  codeHash: string;
  grantId: string;
  clientId: string;
  clientRegistrationId: string;
  userId: string;
  redirectUri: string;
  codeChallenge: string | null;
  scopes: string;
  nonce: string | null;
  authTime: string;
  issuedAt: string;
  expiresAt: string;
  redeemedAt: string | null;
  /** Set with `redeemedAt`: what ended the code (null on codes redeemed before migration 008: `issued`). */
  outcome: AuthorizationCodeOutcome | null;
  /** The scopes asked for that the user left unticked, space-separated; null when none were (migration 018). */
  declinedScopes: string | null;
}

/** Tokens were issued for the code; the exchange presenting it was refused; the user's grants were ended first. */
export type AuthorizationCodeOutcome = 'issued' | 'refused' | 'withdrawn';

export interface RefreshTokensTable {
  tokenHash: string;
  /** Every token rotated from the same grant; equals the grant id its access tokens carry. */
  familyId: string;
  clientId: string;
  clientRegistrationId: string;
  userId: string;
  scopes: string;
  authTime: string;
  issuedAt: string;
  expiresAt: string;
  /** Set when the token was exchanged for its successor; presenting it again is reuse. */
  rotatedAt: string | null;
  revokedAt: string | null;
}

export interface DeviceCodesTable {
  deviceCodeHash: string;
  /** Normalised: eight letters, no dash, upper case. */
  userCode: string;
  grantId: string;
  clientId: string;
  clientRegistrationId: string;
  /** The budget key of the address that asked (limits/address-key.ts); null for codes issued before it was kept. */
  addressKey: string | null;
  scopes: string;
  /** pending, approved, denied, redeemed. */
  status: string;
  userId: string | null;
  authTime: string | null;
  intervalSeconds: number;
  lastPolledAt: string | null;
  createdAt: string;
  expiresAt: string;
  /** Once the user answered: the scopes asked for that the user left unticked; null when none were (migration 018). */
  declinedScopes: string | null;
}

/** One revocation, deactivation, deletion, role or scope change; servers follow `seq` (invalidation-feed.ts). */
export interface InvalidationsTable {
  seq: Generated<number>;
  /** `token`: target is a jti; `user`: a user id; `client`: a client_id (its tokens and its users' tokens). */
  kind: string;
  target: string;
  createdAt: string;
}

export interface AuditEventsTable {
  seq: Generated<number>;
  id: string;
  time: string;
  requestId: string | null;
  subject: string | null;
  clientId: string | null;
  interface: string;
  operation: string;
  resourceType: string | null;
  resourceId: string | null;
  decision: string;
  reason: string;
  /** Hash of the previous event (chain.ts); null only for rows written before the chain existed. */
  prevHash: string | null;
  hash: string | null;
  /** Aggregated events only (audit/auth-failures.ts): how many decisions, from where, over which time. */
  count: number | null;
  sourceAddress: string | null;
  firstSeen: string | null;
  lastSeen: string | null;
  /** The scopes a consent, code or token decision was about (space-separated); null for other decisions. */
  scopes: string | null;
  /** The W3C trace id of the request, when its caller sent a `traceparent`; else null. */
  traceId: string | null;
}

export interface AuditKeysTable {
  kid: string;
  publicJwk: string;
  privateJwkEncrypted: string;
  createdAt: string;
}

/** A signed statement of the chain's head; numbered from 1 without gaps. */
export interface AuditCheckpointsTable {
  number: number;
  headSeq: number;
  headHash: string;
  /** Events from the first ever to the head, archived ones included. */
  eventCount: number;
  time: string;
  keyFingerprint: string;
  /** The signed checkpoint (compact JWS over the fields above). */
  jws: string;
}

/** Events up to `upToSeq` were exported and removed; the chain now continues from `lastHash`. */
export interface AuditArchivesTable {
  upToSeq: number;
  lastHash: string;
  eventCount: number;
  checkpointNumber: number;
  archivedAt: string;
  keyFingerprint: string;
  /** The record signed with the audit key (compact JWS over the fields above). */
  jws: string;
}

export interface IdempotencyKeysTable {
  /** `<client_id> <subject>`: keys never collide across callers. */
  scope: string;
  key: string;
  requestHash: string;
  /** 0 while the first request is in flight, then the response status. */
  status: number;
  location: string | null;
  body: string | null;
  createdAt: string;
  expiresAt: string;
}

export interface Database {
  users: UsersTable;
  posts: PostsTable;
  comments: CommentsTable;
  clients: ClientsTable;
  signingKeys: SigningKeysTable;
  accessTokens: AccessTokensTable;
  revokedAccessTokens: RevokedAccessTokensTable;
  deprecatedUses: DeprecatedUsesTable;
  auditEvents: AuditEventsTable;
  idempotencyKeys: IdempotencyKeysTable;
  invalidations: InvalidationsTable;
  auditKeys: AuditKeysTable;
  auditCheckpoints: AuditCheckpointsTable;
  auditArchives: AuditArchivesTable;
  loginSessions: LoginSessionsTable;
  interactions: InteractionsTable;
  consents: ConsentsTable;
  authorizationCodes: AuthorizationCodesTable;
  refreshTokens: RefreshTokensTable;
  deviceCodes: DeviceCodesTable;
}
