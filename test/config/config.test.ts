import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { ConfigError, DEVELOPMENT_KEY_SECRET, developmentDefaultWarning, loadConfig } from '../../src/config/config.js';

function problemsOf(env: Record<string, string>): readonly string[] {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('configuration was accepted');
}

describe('configuration', () => {
  it('has working development defaults and says which ones are in use', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      env: 'development',
      host: '127.0.0.1',
      port: 3000,
      issuer: 'http://127.0.0.1:3000',
      databaseUrl: null,
      redisUrl: null,
      keyEncryptionSecret: DEVELOPMENT_KEY_SECRET,
      tokens: { accessTokenTtl: 600, refreshTokenTtl: 14 * 86400, refreshTokenMaxLifetime: 90 * 86400, clockSkew: 30 },
    });
    expect(config.dataDir.endsWith('/data')).toBe(true);
    expect(config.developmentDefaults).toEqual(['ISSUER', 'KEY_ENCRYPTION_SECRET']);
  });

  it('defaults the issuer to the loopback address when HOST is a wildcard address, and warns naming it', () => {
    const cases: [string, string][] = [
      ['0.0.0.0', 'http://127.0.0.1:3000'],
      ['::', 'http://[::1]:3000'],
      ['[::]', 'http://[::1]:3000'],
      ['0:0:0:0:0:0:0:0', 'http://[::1]:3000'],
      ['::1', 'http://[::1]:3000'],
      ['192.0.2.10', 'http://192.0.2.10:3000'],
      ['api.internal', 'http://api.internal:3000'],
    ];
    for (const [host, issuer] of cases) {
      const config = loadConfig({ HOST: host });
      expect({ host, issuer: config.issuer, defaults: config.developmentDefaults }).toEqual({ host, issuer, defaults: ['ISSUER', 'KEY_ENCRYPTION_SECRET'] });
      expect(developmentDefaultWarning(config, 'ISSUER')).toBe(`ISSUER is not set: using ${issuer}, development only; set ISSUER to the URL clients use`);
    }
    expect(loadConfig({ HOST: '0.0.0.0', PORT: '8080', ISSUER: 'https://api.example.com' })).toMatchObject({ host: '0.0.0.0', issuer: 'https://api.example.com' });
    expect(developmentDefaultWarning(loadConfig({}), 'KEY_ENCRYPTION_SECRET')).toBe(
      'KEY_ENCRYPTION_SECRET is not set: using a development-only default (refused when NODE_ENV=production)',
    );
  });

  it('is frozen all the way down', () => {
    const config = loadConfig({});
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.tokens)).toBe(true);
    expect(() => {
      (config.tokens as { accessTokenTtl: number }).accessTokenTtl = 5;
    }).toThrow(TypeError);
  });

  it('runs one process in development and one per core in production unless WORKERS says otherwise', () => {
    expect(loadConfig({}).workers).toBe(1);
    const production = { NODE_ENV: 'production', ISSUER: 'https://api.example.com', KEY_ENCRYPTION_SECRET: 'k'.repeat(40) };
    expect(loadConfig(production).workers).toBe(availableParallelism());
    expect(loadConfig({ ...production, WORKERS: '3' }).workers).toBe(3);
    expect(loadConfig({ WORKERS: '4' }).workers).toBe(4);
    expect(problemsOf({ WORKERS: '0' })).toEqual(['WORKERS: must be between 1 and 256, got 0']);
    expect(problemsOf({ WORKERS: 'all' })).toEqual(['WORKERS: must be an integer, got "all"']);
  });

  it('hashes half the cores over the workers at once, at least one, unless PASSWORD_HASH_CONCURRENCY says otherwise', () => {
    const cores = availableParallelism();
    expect(loadConfig({}).passwordHashConcurrency).toBe(Math.min(64, Math.max(1, Math.floor(cores / 2))));
    expect(loadConfig({ WORKERS: String(cores) }).passwordHashConcurrency).toBe(1);
    expect(loadConfig({ WORKERS: '256' }).passwordHashConcurrency).toBe(1);
    expect(loadConfig({ PASSWORD_HASH_CONCURRENCY: '6', WORKERS: '4' }).passwordHashConcurrency).toBe(6);
    expect(problemsOf({ PASSWORD_HASH_CONCURRENCY: '0' })).toEqual(['PASSWORD_HASH_CONCURRENCY: must be between 1 and 64, got 0']);
    expect(problemsOf({ PASSWORD_HASH_CONCURRENCY: '65' })).toEqual(['PASSWORD_HASH_CONCURRENCY: must be between 1 and 64, got 65']);
  });

  it('refuses access-token lifetimes outside 300..3600 s', () => {
    expect(problemsOf({ ACCESS_TOKEN_TTL: '299' })).toEqual(['ACCESS_TOKEN_TTL: must be between 300 and 3600, got 299']);
    expect(problemsOf({ ACCESS_TOKEN_TTL: '3601' })).toEqual(['ACCESS_TOKEN_TTL: must be between 300 and 3600, got 3601']);
    expect(loadConfig({ ACCESS_TOKEN_TTL: '3600' }).tokens.accessTokenTtl).toBe(3600);
    // A negative number is a number out of range, not "not an integer".
    expect(problemsOf({ REQUEST_TIMEOUT_SECONDS: '-1' })).toEqual(['REQUEST_TIMEOUT_SECONDS: must be between 1 and 300, got -1']);
    expect(problemsOf({ MAX_CONNECTIONS_PER_ADDRESS: '-5', RATE_LIMIT_ADDRESS_MAX: '0' })).toEqual([
      'MAX_CONNECTIONS_PER_ADDRESS: must be between 0 and 100000, got -5',
      'RATE_LIMIT_ADDRESS_MAX: must be between 1 and 1000000, got 0',
    ]);
  });

  it('reads RATE_LIMIT_USER_MAX, which defaults to RATE_LIMIT_MAX, refusing values out of range', () => {
    expect(loadConfig({}).rateLimit).toMatchObject({ max: 600, userMax: 600 });
    expect(loadConfig({ RATE_LIMIT_MAX: '5000' }).rateLimit).toMatchObject({ max: 5000, userMax: 5000 });
    expect(loadConfig({ RATE_LIMIT_MAX: '5000', RATE_LIMIT_USER_MAX: '300' }).rateLimit).toMatchObject({ max: 5000, userMax: 300 });
    expect(problemsOf({ RATE_LIMIT_USER_MAX: '0' })).toEqual(['RATE_LIMIT_USER_MAX: must be between 1 and 1000000, got 0']);
    expect(problemsOf({ RATE_LIMIT_USER_MAX: 'lots' })).toEqual(['RATE_LIMIT_USER_MAX: must be an integer, got "lots"']);
  });

  it('reads DATABASE_POOL_SIZE (10 by default) with DATABASE_URL, and refuses it without, where nothing would use it', () => {
    const url = 'postgres://portcullis@db.internal/portcullis';
    expect(loadConfig({ DATABASE_URL: url }).databasePoolSize).toBe(10);
    expect(loadConfig({ DATABASE_URL: url, DATABASE_POOL_SIZE: '4' }).databasePoolSize).toBe(4);
    expect(problemsOf({ DATABASE_URL: url, DATABASE_POOL_SIZE: '0' })).toEqual(['DATABASE_POOL_SIZE: must be between 1 and 1000, got 0']);
    expect(problemsOf({ DATABASE_URL: url, DATABASE_POOL_SIZE: 'many' })).toEqual(['DATABASE_POOL_SIZE: must be an integer, got "many"']);
    expect(problemsOf({ DATABASE_POOL_SIZE: '4' })).toEqual(['DATABASE_POOL_SIZE: applies to PostgreSQL only; set DATABASE_URL or remove it']);
    expect(loadConfig({ DATABASE_POOL_SIZE: '' }).databasePoolSize).toBe(10);
  });

  it('lists every problem at once', () => {
    expect(problemsOf({ PORT: 'eighty', DATABASE_URL: 'mysql://x', LOG_LEVEL: 'loud', TRUST_PROXY: 'maybe' })).toEqual([
      'PORT: must be an integer, got "eighty"',
      'LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent',
      'DATABASE_URL: must use postgres: or postgresql:',
      'TRUST_PROXY: "maybe" is neither a number of proxies, an IP address, a CIDR range (address/prefix) nor one of loopback, linklocal, uniquelocal',
    ]);
  });

  it('reads TRUST_PROXY as nothing trusted by default, a number of proxies, or the proxies\' addresses and ranges', () => {
    for (const off of [{}, { TRUST_PROXY: '' }, { TRUST_PROXY: 'false' }, { TRUST_PROXY: '0' }]) expect(loadConfig(off).http.trustProxy).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '1' }).http.trustProxy).toBe(1);
    expect(loadConfig({ TRUST_PROXY: '10' }).http.trustProxy).toBe(10);
    expect(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 192.0.2.7,::1,fd00::/8,loopback' }).http.trustProxy).toEqual(['10.0.0.0/8', '192.0.2.7', '::1', 'fd00::/8', 'loopback']);
  });

  it('refuses TRUST_PROXY=true, which would let any client choose its address, saying what to set instead', () => {
    expect(problemsOf({ TRUST_PROXY: 'true' })).toEqual([
      'TRUST_PROXY: true would trust every X-Forwarded-For entry, which any client can forge; set the number of proxies in front of the server (e.g. 1) or their addresses and CIDR ranges (e.g. 10.0.0.0/8,192.0.2.7)',
    ]);
  });

  it('refuses a TRUST_PROXY that is no number of proxies, address or range, naming each bad entry', () => {
    expect(problemsOf({ TRUST_PROXY: '11' })).toEqual(['TRUST_PROXY: must be a number of proxies between 1 and 10, got 11']);
    expect(problemsOf({ TRUST_PROXY: '10.0.0.0/33,proxy.example.com,,fd00::/129,10.0.0.0/x,1.2.3.4/08' })).toEqual([
      'TRUST_PROXY: "10.0.0.0/33": the prefix length must be 0 to 32',
      'TRUST_PROXY: "proxy.example.com" is neither a number of proxies, an IP address, a CIDR range (address/prefix) nor one of loopback, linklocal, uniquelocal',
      'TRUST_PROXY: has an empty entry (proxies are separated by single commas)',
      'TRUST_PROXY: "fd00::/129": the prefix length must be 0 to 128',
      'TRUST_PROXY: "10.0.0.0/x": the prefix length must be 0 to 32',
    ]);
    expect(problemsOf({ TRUST_PROXY: '-1' })).toEqual([
      'TRUST_PROXY: "-1" is neither a number of proxies, an IP address, a CIDR range (address/prefix) nor one of loopback, linklocal, uniquelocal',
    ]);
  });

  it('rotates signing keys every 90 days by default; SIGNING_KEY_ROTATION_DAYS sets 1 to 365 days, or 0 for never', () => {
    expect(loadConfig({}).signingKeys).toEqual({ rotationDays: 90 });
    expect(loadConfig({ SIGNING_KEY_ROTATION_DAYS: '0' }).signingKeys).toEqual({ rotationDays: 0 });
    expect(loadConfig({ SIGNING_KEY_ROTATION_DAYS: '1' }).signingKeys).toEqual({ rotationDays: 1 });
    expect(loadConfig({ SIGNING_KEY_ROTATION_DAYS: '365' }).signingKeys).toEqual({ rotationDays: 365 });
    expect(problemsOf({ SIGNING_KEY_ROTATION_DAYS: '366' })).toEqual(['SIGNING_KEY_ROTATION_DAYS: must be between 0 and 365, got 366']);
    expect(problemsOf({ SIGNING_KEY_ROTATION_DAYS: '-1' })).toEqual(['SIGNING_KEY_ROTATION_DAYS: must be between 0 and 365, got -1']);
    expect(problemsOf({ SIGNING_KEY_ROTATION_DAYS: '1.5' })).toEqual(['SIGNING_KEY_ROTATION_DAYS: must be an integer, got "1.5"']);
    expect(problemsOf({ SIGNING_KEY_ROTATION_DAYS: 'monthly' })).toEqual(['SIGNING_KEY_ROTATION_DAYS: must be an integer, got "monthly"']);
  });

  it('reads PREVIOUS_KEY_ENCRYPTION_SECRET, at least 32 characters and not the current secret', () => {
    const current = { KEY_ENCRYPTION_SECRET: 'k'.repeat(40) };
    expect(loadConfig(current).previousKeyEncryptionSecret).toBeNull();
    expect(loadConfig({ ...current, PREVIOUS_KEY_ENCRYPTION_SECRET: 'p'.repeat(32) }).previousKeyEncryptionSecret).toBe('p'.repeat(32));
    // Moving off the development default: it is the previous secret then.
    expect(loadConfig({ ...current, PREVIOUS_KEY_ENCRYPTION_SECRET: DEVELOPMENT_KEY_SECRET }).previousKeyEncryptionSecret).toBe(DEVELOPMENT_KEY_SECRET);
    expect(problemsOf({ ...current, PREVIOUS_KEY_ENCRYPTION_SECRET: 'p'.repeat(31) })).toEqual(['PREVIOUS_KEY_ENCRYPTION_SECRET: must be at least 32 characters']);
    expect(problemsOf({ ...current, PREVIOUS_KEY_ENCRYPTION_SECRET: 'k'.repeat(40) })).toEqual([
      'PREVIOUS_KEY_ENCRYPTION_SECRET: is the same as KEY_ENCRYPTION_SECRET; set it to the secret being replaced, or unset it',
    ]);
  });

  it('refuses development defaults in production', () => {
    expect(problemsOf({ NODE_ENV: 'production' })).toEqual([
      'NODE_ENV: production refuses development defaults; set ISSUER, KEY_ENCRYPTION_SECRET',
    ]);
    expect(problemsOf({ NODE_ENV: 'production', ISSUER: 'http://api.example.com', KEY_ENCRYPTION_SECRET: 'k'.repeat(40) })).toEqual([
      'ISSUER: must use https in production',
    ]);
    expect(loadConfig({ NODE_ENV: 'production', ISSUER: 'https://api.example.com/', KEY_ENCRYPTION_SECRET: 'k'.repeat(40) }).issuer).toBe(
      'https://api.example.com',
    );
  });

  it('serves GraphiQL outside production by default, and in production only when GRAPHIQL turns it on', () => {
    const production = { NODE_ENV: 'production', ISSUER: 'https://api.example.com/', KEY_ENCRYPTION_SECRET: 'k'.repeat(40) };
    expect(loadConfig({}).graphql.graphiql).toBe(true);
    expect(loadConfig({ GRAPHIQL: 'false' }).graphql.graphiql).toBe(false);
    expect(loadConfig(production).graphql.graphiql).toBe(false);
    expect(loadConfig({ ...production, GRAPHIQL: 'true' }).graphql.graphiql).toBe(true);
  });

  it('reads the GraphQL limits, refusing values out of range', () => {
    expect(loadConfig({}).graphql.limits).toEqual({ maxDepth: 8, maxCost: 5000, maxAliases: 20, maxTokens: 2000, maxDirectivesPerField: 4, maxBatch: 1 });
    expect(loadConfig({ GRAPHQL_MAX_DEPTH: '12', GRAPHQL_MAX_BATCH: '5' }).graphql.limits).toMatchObject({ maxDepth: 12, maxBatch: 5 });
    expect(problemsOf({ GRAPHQL_MAX_DEPTH: '1', GRAPHQL_MAX_COST: 'lots' }).length).toBe(2);
  });

  it('reads the audit settings, refusing a pending-event bound out of range', () => {
    expect(loadConfig({}).audit).toEqual({ failureWindowSeconds: 60, checkpointSeconds: 300, maxPending: 50_000 });
    expect(loadConfig({ AUDIT_MAX_PENDING: '500' }).audit.maxPending).toBe(500);
    expect(problemsOf({ AUDIT_MAX_PENDING: '9' })).toEqual(['AUDIT_MAX_PENDING: must be between 10 and 1000000, got 9']);
    expect(problemsOf({ AUDIT_MAX_PENDING: 'many' })).toEqual(['AUDIT_MAX_PENDING: must be an integer, got "many"']);
  });

  it('reads CORS_ORIGINS as exact origins, and turns CORS off when it is unset or empty', () => {
    expect(loadConfig({}).cors.origins).toEqual([]);
    expect(loadConfig({ CORS_ORIGINS: '' }).cors.origins).toEqual([]);
    expect(loadConfig({ CORS_ORIGINS: 'https://app.example.com, http://127.0.0.1:5173,http://[::1]:8080' }).cors.origins).toEqual([
      'https://app.example.com',
      'http://127.0.0.1:5173',
      'http://[::1]:8080',
    ]);
  });

  it('refuses CORS_ORIGINS entries that are not exact origins, naming each', () => {
    const refused = (value: string) => problemsOf({ CORS_ORIGINS: value });
    expect(refused('*')).toEqual(['CORS_ORIGINS: "*": wildcards are not allowed; list each origin exactly']);
    expect(refused('https://*.example.com')).toEqual(['CORS_ORIGINS: "https://*.example.com": wildcards are not allowed; list each origin exactly']);
    expect(refused('null')).toEqual(['CORS_ORIGINS: "null" is the origin of sandboxed and file: documents; it cannot be allowed']);
    const suggest = (entry: string, origin: string) =>
      `CORS_ORIGINS: ${JSON.stringify(entry)} is not an origin as browsers send it (scheme://host[:port], no path); did you mean ${JSON.stringify(origin)}?`;
    expect(refused('https://app.example.com/')).toEqual([suggest('https://app.example.com/', 'https://app.example.com')]);
    expect(refused('https://app.example.com/app')).toEqual([suggest('https://app.example.com/app', 'https://app.example.com')]);
    expect(refused('https://app.example.com?x=1')).toEqual([suggest('https://app.example.com?x=1', 'https://app.example.com')]);
    expect(refused('https://App.Example.com')).toEqual([suggest('https://App.Example.com', 'https://app.example.com')]);
    expect(refused('https://app.example.com:443')).toEqual([suggest('https://app.example.com:443', 'https://app.example.com')]);
    expect(refused('https://user@app.example.com')).toEqual([suggest('https://user@app.example.com', 'https://app.example.com')]);
    expect(refused('https://bücher.example')).toEqual([suggest('https://bücher.example', 'https://xn--bcher-kva.example')]);
    expect(refused('app.example.com')).toEqual(['CORS_ORIGINS: "app.example.com" is not an origin (scheme://host[:port])']);
    expect(refused('ftp://files.example.com')).toEqual(['CORS_ORIGINS: "ftp://files.example.com" must use http or https']);
    expect(refused('https://a.example.com,,https://b.example.com')).toEqual([
      'CORS_ORIGINS: has an empty entry (origins are separated by single commas)',
    ]);
    // Every bad entry is listed, beside the other settings' problems.
    expect(problemsOf({ CORS_ORIGINS: 'https://ok.example.com,*,http://x.example.com/', PORT: 'eighty' })).toEqual([
      'PORT: must be an integer, got "eighty"',
      'CORS_ORIGINS: "*": wildcards are not allowed; list each origin exactly',
      suggest('http://x.example.com/', 'http://x.example.com'),
    ]);
  });

  it('refuses weak bootstrap credentials', () => {
    expect(problemsOf({ BOOTSTRAP_ADMIN_PASSWORD: 'short', BOOTSTRAP_CLIENT_SECRET: 'also-short', KEY_ENCRYPTION_SECRET: 'tiny' })).toEqual([
      'KEY_ENCRYPTION_SECRET: must be at least 32 characters',
      'BOOTSTRAP_ADMIN_PASSWORD: must be at least 12 characters',
      'BOOTSTRAP_CLIENT_SECRET: must be at least 32 characters',
    ]);
  });
});
