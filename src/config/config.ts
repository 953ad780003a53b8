import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';
import type { GraphqlLimits } from '../limits/graphql-limits.js';
import path from 'node:path';

/**
 * The one reader of process.env. Every setting, its default and its bounds live here; `loadConfig`
 * validates all of them at once and reports every problem, then returns a deeply frozen object.
 */
export interface Config {
  readonly env: 'development' | 'production' | 'test';
  readonly host: string;
  readonly port: number;
  readonly issuer: string;
  readonly dataDir: string;
  readonly databaseUrl: string | null;
  /** DATABASE_POOL_SIZE: PostgreSQL connections this process may open (set only with DATABASE_URL). */
  readonly databasePoolSize: number;
  readonly redisUrl: string | null;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  readonly keyEncryptionSecret: string;
  /**
   * The secret the stored private keys were encrypted under before KEY_ENCRYPTION_SECRET replaced it: still
   * accepted for decrypting them, and what `keys rewrap` re-encrypts them from. Null when not set.
   */
  readonly previousKeyEncryptionSecret: string | null;
  readonly signingKeys: {
    /** Days a signing key signs before the next one takes over; 0 leaves rotation to `keys rotate`. */
    readonly rotationDays: number;
  };
  readonly tokens: {
    readonly accessTokenTtl: number;
    readonly refreshTokenTtl: number;
    /** Seconds from the sign-in a refresh-token family comes from after which no rotation extends it. */
    readonly refreshTokenMaxLifetime: number;
    readonly maxTokenLength: number;
    readonly clockSkew: number;
    readonly cacheSize: number;
  };
  readonly signIn: {
    /** Seconds a browser stays signed in to the authorization server's pages. */
    readonly sessionTtl: number;
    /** RFC 6749 §4.3, for legacy clients only (the client's `legacy` flag is required too). */
    readonly passwordGrant: boolean;
  };
  readonly http: {
    readonly bodyLimit: number;
    /**
     * Which X-Forwarded-For hops to believe for the client's address: none (false), the N proxies nearest
     * the server, or the proxies at these addresses and ranges. Passed to Fastify's `trustProxy` as is.
     */
    readonly trustProxy: false | number | readonly string[];
    /** Seconds a request may take to arrive whole, headers and body (408 after). */
    readonly requestTimeoutSeconds: number;
    /** Open connections one socket address may hold; 0 turns the cap off (with TRUST_PROXY set it is off). */
    readonly maxConnectionsPerAddress: number;
  };
  readonly rateLimit: {
    /** Per client (unless its registration sets its own). */
    readonly max: number;
    /** Per user: a user's token draws on this budget and on its client's. */
    readonly userMax: number;
    readonly windowSeconds: number;
    readonly anonymousMax: number;
    readonly addressMax: number;
  };
  readonly audit: {
    /** Refused credentials are counted per address over this many seconds, then written as one event. */
    readonly failureWindowSeconds: number;
    /** How often a running server signs a checkpoint of the audit chain (when events were added). */
    readonly checkpointSeconds: number;
    /** Events waiting to be written at which new requests are refused (503) rather than any event dropped. */
    readonly maxPending: number;
  };
  readonly bootstrap: {
    readonly adminEmail: string | null;
    readonly adminPassword: string | null;
    readonly clientId: string | null;
    readonly clientSecret: string | null;
  };
  readonly graphql: {
    readonly introspectionPublic: boolean;
    /** What one document may ask (src/limits/graphql-limits.ts). */
    readonly limits: GraphqlLimits;
    /** GRAPHQL_TRUSTED_DOCUMENTS: a JSON file of the only documents that run; null runs any document. */
    readonly trustedDocuments: string | null;
    /** GRAPHIQL: serve GraphiQL at /graphiql (default: outside production). */
    readonly graphiql: boolean;
  };
  readonly cors: {
    /** Exact origins (`scheme://host[:port]`) browser apps may call from; empty turns CORS off. */
    readonly origins: readonly string[];
  };
  readonly metrics: {
    /** METRICS_PORT: where `GET /metrics` listens; null (unset) turns the listener off. */
    readonly port: number | null;
    /** METRICS_HOST: its address, loopback unless set. */
    readonly host: string;
  };
  /** WORKERS: server processes behind the one port (node:cluster); the cores in production, else 1. */
  readonly workers: number;
  /**
   * PASSWORD_HASH_CONCURRENCY: password hashes one process runs at once (src/oauth/passwords.ts); half the
   * cores over the workers, at least 1 and at most 64.
   */
  readonly passwordHashConcurrency: number;
  /** Development defaults in force; production refuses to start with any of them. */
  readonly developmentDefaults: readonly string[];
}

/** Password hashes one of `workers` processes runs at once unless told: half the cores over them, 1 to 64. */
export function defaultPasswordHashConcurrency(workers: number): number {
  return Math.min(64, Math.max(1, Math.floor(availableParallelism() / 2 / workers)));
}

/** The development-only key-encryption secret. Production refuses it. */
export const DEVELOPMENT_KEY_SECRET = 'portcullis-development-key-encryption-secret-do-not-use';

type Env = Record<string, string | undefined>;

class Problems {
  readonly list: string[] = [];
  add(name: string, message: string): void {
    this.list.push(`${name}: ${message}`);
  }
}

function readInt(env: Env, name: string, fallback: number, min: number, max: number, problems: Problems): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^-?\d+$/.test(raw)) {
    problems.add(name, `must be an integer, got ${JSON.stringify(raw)}`);
    return fallback;
  }
  const value = Number(raw);
  if (value < min || value > max) problems.add(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

function readBool(env: Env, name: string, fallback: boolean, problems: Problems): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  problems.add(name, `must be true or false, got ${JSON.stringify(raw)}`);
  return fallback;
}

function readEnabled(env: Env, name: string, problems: Problems): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '' || raw === 'disabled') return false;
  if (raw === 'enabled') return true;
  problems.add(name, `must be enabled or disabled, got ${JSON.stringify(raw)}`);
  return false;
}

function readString(env: Env, name: string): string | null {
  const raw = env[name];
  return raw === undefined || raw === '' ? null : raw;
}

function readUrl(env: Env, name: string, protocols: string[], problems: Problems): string | null {
  const raw = readString(env, name);
  if (raw === null) return null;
  try {
    const url = new URL(raw);
    if (!protocols.includes(url.protocol)) problems.add(name, `must use ${protocols.join(' or ')}`);
  } catch {
    problems.add(name, 'must be a URL');
  }
  return raw;
}

/**
 * CORS_ORIGINS: comma-separated origins, each exactly as a browser serialises it in `Origin` (Fetch standard,
 * "`Origin` header"; RFC 6454 §6.1) — scheme, lower-case ASCII host, port only when not the scheme's default, no path —
 * because the server compares them byte for byte. A wildcard or `null` would open the API to any page.
 */
function readOrigins(env: Env, name: string, problems: Problems): string[] {
  const raw = readString(env, name);
  if (raw === null) return [];
  const origins: string[] = [];
  for (const entry of raw.split(',').map((part) => part.trim())) {
    const problem = originProblem(entry);
    if (problem === null) origins.push(entry);
    else problems.add(name, problem);
  }
  return origins;
}

function originProblem(entry: string): string | null {
  if (entry === '') return 'has an empty entry (origins are separated by single commas)';
  // Sandboxed documents, file: pages and cross-origin redirects send `Origin: null` (Fetch standard, "`Origin` header").
  if (entry === 'null') return '"null" is the origin of sandboxed and file: documents; it cannot be allowed';
  if (entry.includes('*')) return `${JSON.stringify(entry)}: wildcards are not allowed; list each origin exactly`;
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return `${JSON.stringify(entry)} is not an origin (scheme://host[:port])`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `${JSON.stringify(entry)} must use http or https`;
  if (url.origin !== entry) {
    return `${JSON.stringify(entry)} is not an origin as browsers send it (scheme://host[:port], no path); did you mean ${JSON.stringify(url.origin)}?`;
  }
  return null;
}

/** proxy-addr's names for ranges (Fastify's trustProxy takes them beside addresses and CIDRs). */
const PROXY_RANGE_NAMES = ['loopback', 'linklocal', 'uniquelocal'];
const MAX_PROXY_HOPS = 10;

/**
 * TRUST_PROXY: whom to believe about the client's address, which rate limits and sign-in throttling key on.
 * `true` would believe every X-Forwarded-For entry, and a client writes the leftmost ones itself, so any
 * client could pick a fresh address per request: it is refused rather than guessed at (taking it as one hop
 * would be wrong behind two proxies, where every user would then share the nearer proxy's budgets).
 */
function readTrustProxy(env: Env, name: string, problems: Problems): false | number | string[] {
  const raw = readString(env, name)?.trim() ?? null;
  if (raw === null || raw === 'false' || raw === '0') return false;
  if (raw === 'true') {
    problems.add(
      name,
      'true would trust every X-Forwarded-For entry, which any client can forge; set the number of proxies in front of the server (e.g. 1) or their addresses and CIDR ranges (e.g. 10.0.0.0/8,192.0.2.7)',
    );
    return false;
  }
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops > MAX_PROXY_HOPS) problems.add(name, `must be a number of proxies between 1 and ${MAX_PROXY_HOPS}, got ${hops}`);
    return hops;
  }
  const entries = raw.split(',').map((entry) => entry.trim());
  for (const entry of entries) {
    const problem = proxyEntryProblem(entry);
    if (problem !== null) problems.add(name, problem);
  }
  return entries;
}

function proxyEntryProblem(entry: string): string | null {
  if (entry === '') return 'has an empty entry (proxies are separated by single commas)';
  if (PROXY_RANGE_NAMES.includes(entry)) return null;
  const slash = entry.indexOf('/');
  const address = slash < 0 ? entry : entry.slice(0, slash);
  const family = isIP(address);
  const invalid = `${JSON.stringify(entry)} is neither a number of proxies, an IP address, a CIDR range (address/prefix) nor one of ${PROXY_RANGE_NAMES.join(', ')}`;
  if (family === 0) return invalid;
  if (slash < 0) return null;
  const prefix = entry.slice(slash + 1);
  const bits = family === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > bits) return `${JSON.stringify(entry)}: the prefix length must be 0 to ${bits}`;
  return null;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

export function loadConfig(env: Env = process.env): Config {
  const problems = new Problems();
  const developmentDefaults: string[] = [];
  const nodeEnv = env.NODE_ENV === 'production' ? 'production' : env.NODE_ENV === 'test' ? 'test' : 'development';

  const port = readInt(env, 'PORT', 3000, 0, 65535, problems);
  const host = readString(env, 'HOST') ?? '127.0.0.1';
  let issuer = readUrl(env, 'ISSUER', ['http:', 'https:'], problems);
  if (issuer === null) {
    issuer = defaultIssuer(host, port);
    developmentDefaults.push('ISSUER');
  } else {
    issuer = issuer.replace(/\/+$/, '');
    if (nodeEnv === 'production' && !issuer.startsWith('https:')) problems.add('ISSUER', 'must use https in production');
  }

  let keyEncryptionSecret = readString(env, 'KEY_ENCRYPTION_SECRET');
  if (keyEncryptionSecret === null) {
    keyEncryptionSecret = DEVELOPMENT_KEY_SECRET;
    developmentDefaults.push('KEY_ENCRYPTION_SECRET');
  } else if (keyEncryptionSecret.length < 32) {
    problems.add('KEY_ENCRYPTION_SECRET', 'must be at least 32 characters');
  }
  const previousKeyEncryptionSecret = readString(env, 'PREVIOUS_KEY_ENCRYPTION_SECRET');
  if (previousKeyEncryptionSecret !== null && previousKeyEncryptionSecret.length < 32) {
    problems.add('PREVIOUS_KEY_ENCRYPTION_SECRET', 'must be at least 32 characters');
  } else if (previousKeyEncryptionSecret !== null && previousKeyEncryptionSecret === keyEncryptionSecret) {
    problems.add('PREVIOUS_KEY_ENCRYPTION_SECRET', 'is the same as KEY_ENCRYPTION_SECRET; set it to the secret being replaced, or unset it');
  }

  const logLevel = (readString(env, 'LOG_LEVEL') ?? (nodeEnv === 'test' ? 'silent' : 'info')) as Config['logLevel'];
  if (!LOG_LEVELS.includes(logLevel)) problems.add('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);

  const rateLimitMax = readInt(env, 'RATE_LIMIT_MAX', 600, 1, 1_000_000, problems);
  const workers = readInt(env, 'WORKERS', nodeEnv === 'production' ? availableParallelism() : 1, 1, 256, problems);
  const config: Config = {
    env: nodeEnv,
    host,
    port,
    issuer,
    dataDir: path.resolve(readString(env, 'DATA_DIR') ?? './data'),
    databaseUrl: readUrl(env, 'DATABASE_URL', ['postgres:', 'postgresql:'], problems),
    databasePoolSize: readInt(env, 'DATABASE_POOL_SIZE', 10, 1, 1000, problems),
    redisUrl: readUrl(env, 'REDIS_URL', ['redis:', 'rediss:'], problems),
    logLevel,
    keyEncryptionSecret,
    previousKeyEncryptionSecret,
    // A key signs for this long; 0 turns the schedule off. At least a day, so that a key's overlap with the
    // next (published ahead, kept after for the longest token lifetime: key-store.ts) stays a small part of it.
    signingKeys: { rotationDays: readInt(env, 'SIGNING_KEY_ROTATION_DAYS', 90, 0, 365, problems) },
    tokens: {
      // The seed bounds access tokens to 5 minutes .. 1 hour and refresh tokens to days .. weeks.
      accessTokenTtl: readInt(env, 'ACCESS_TOKEN_TTL', 600, 300, 3600, problems),
      refreshTokenTtl: readInt(env, 'REFRESH_TOKEN_TTL', 14 * 86400, 86400, 60 * 86400, problems),
      refreshTokenMaxLifetime: readInt(env, 'REFRESH_TOKEN_MAX_LIFETIME', 90 * 86400, 86400, 365 * 86400, problems),
      maxTokenLength: readInt(env, 'MAX_TOKEN_LENGTH', 4096, 512, 16384, problems),
      clockSkew: readInt(env, 'TOKEN_CLOCK_SKEW', 30, 0, 300, problems),
      cacheSize: readInt(env, 'TOKEN_CACHE_SIZE', 10000, 0, 1_000_000, problems),
    },
    signIn: {
      sessionTtl: readInt(env, 'SESSION_TTL', 12 * 3600, 300, 30 * 86400, problems),
      passwordGrant: readEnabled(env, 'OAUTH_PASSWORD_GRANT', problems),
    },
    http: {
      bodyLimit: readInt(env, 'BODY_LIMIT', 64 * 1024, 1024, 10 * 1024 * 1024, problems),
      trustProxy: readTrustProxy(env, 'TRUST_PROXY', problems),
      requestTimeoutSeconds: readInt(env, 'REQUEST_TIMEOUT_SECONDS', 10, 1, 300, problems),
      maxConnectionsPerAddress: readInt(env, 'MAX_CONNECTIONS_PER_ADDRESS', 64, 0, 100_000, problems),
    },
    rateLimit: {
      max: rateLimitMax,
      userMax: readInt(env, 'RATE_LIMIT_USER_MAX', rateLimitMax, 1, 1_000_000, problems),
      windowSeconds: readInt(env, 'RATE_LIMIT_WINDOW', 60, 1, 86400, problems),
      anonymousMax: readInt(env, 'RATE_LIMIT_ANONYMOUS_MAX', 120, 1, 1_000_000, problems),
      addressMax: readInt(env, 'RATE_LIMIT_ADDRESS_MAX', 300, 1, 1_000_000, problems),
    },
    audit: {
      failureWindowSeconds: readInt(env, 'AUDIT_FAILURE_WINDOW', 60, 1, 3600, problems),
      checkpointSeconds: readInt(env, 'AUDIT_CHECKPOINT_INTERVAL', 300, 1, 86400, problems),
      // About 1 KB of memory per event held (audit-log.ts says why this many).
      maxPending: readInt(env, 'AUDIT_MAX_PENDING', 50_000, 10, 1_000_000, problems),
    },
    bootstrap: {
      adminEmail: readString(env, 'BOOTSTRAP_ADMIN_EMAIL'),
      adminPassword: readString(env, 'BOOTSTRAP_ADMIN_PASSWORD'),
      clientId: readString(env, 'BOOTSTRAP_CLIENT_ID'),
      clientSecret: readString(env, 'BOOTSTRAP_CLIENT_SECRET'),
    },
    graphql: {
      introspectionPublic: readBool(env, 'GRAPHQL_INTROSPECTION_PUBLIC', false, problems),
      limits: {
        maxDepth: readInt(env, 'GRAPHQL_MAX_DEPTH', 8, 2, 64, problems),
        maxCost: readInt(env, 'GRAPHQL_MAX_COST', 5000, 10, 1_000_000, problems),
        maxAliases: readInt(env, 'GRAPHQL_MAX_ALIASES', 20, 0, 1000, problems),
        maxTokens: readInt(env, 'GRAPHQL_MAX_TOKENS', 2000, 100, 100_000, problems),
        maxDirectivesPerField: readInt(env, 'GRAPHQL_MAX_DIRECTIVES', 4, 0, 100, problems),
        maxBatch: readInt(env, 'GRAPHQL_MAX_BATCH', 1, 1, 100, problems),
      },
      trustedDocuments: readString(env, 'GRAPHQL_TRUSTED_DOCUMENTS'),
      graphiql: readBool(env, 'GRAPHIQL', nodeEnv !== 'production', problems),
    },
    cors: { origins: readOrigins(env, 'CORS_ORIGINS', problems) },
    metrics: {
      port: env.METRICS_PORT === undefined || env.METRICS_PORT === '' ? null : readInt(env, 'METRICS_PORT', 9464, 1, 65535, problems),
      host: readString(env, 'METRICS_HOST') ?? '127.0.0.1',
    },
    workers,
    passwordHashConcurrency: readInt(env, 'PASSWORD_HASH_CONCURRENCY', defaultPasswordHashConcurrency(workers), 1, 64, problems),
    developmentDefaults,
  };

  if (config.bootstrap.adminPassword !== null && config.bootstrap.adminPassword.length < 12) {
    problems.add('BOOTSTRAP_ADMIN_PASSWORD', 'must be at least 12 characters');
  }
  if (config.bootstrap.clientSecret !== null && config.bootstrap.clientSecret.length < 32) {
    problems.add('BOOTSTRAP_CLIENT_SECRET', 'must be at least 32 characters');
  }
  // The embedded database has one connection per process: a pool size there would be read and never used.
  if (config.databaseUrl === null && env.DATABASE_POOL_SIZE !== undefined && env.DATABASE_POOL_SIZE !== '') {
    problems.add('DATABASE_POOL_SIZE', 'applies to PostgreSQL only; set DATABASE_URL or remove it');
  }
  if (nodeEnv === 'production' && developmentDefaults.length > 0) {
    problems.add('NODE_ENV', `production refuses development defaults; set ${developmentDefaults.join(', ')}`);
  }
  if (problems.list.length > 0) throw new ConfigError(problems.list);
  return deepFreeze(config);
}

/**
 * The development issuer: the listening address, except that a wildcard address (every interface) is no
 * URL a client can use, so the loopback address of its family stands in for it.
 */
function defaultIssuer(host: string, port: number): string {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  let address = bare;
  if (bare === '0.0.0.0') address = '127.0.0.1';
  else if (isIP(bare) === 6 && /^[0:]+$/.test(bare)) address = '::1';
  return `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
}

/** The start-up warning for a development default in use; the issuer's names the URL it chose. */
export function developmentDefaultWarning(config: Config, name: string): string {
  if (name === 'ISSUER') return `ISSUER is not set: using ${config.issuer}, development only; set ISSUER to the URL clients use`;
  return `${name} is not set: using a development-only default (refused when NODE_ENV=production)`;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/** A test or embedding caller overrides selected settings on top of validated defaults. */
export function configFrom(overrides: Env): Config {
  return loadConfig({ NODE_ENV: 'test', ...overrides });
}

/** For command-line entry points: the configuration, or every problem on stderr and exit code 78 (EX_CONFIG). */
export function loadConfigOrExit(env: Env = process.env): Config {
  try {
    return loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(78);
    }
    throw error;
  }
}
