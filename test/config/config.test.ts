import { describe, expect, it } from 'vitest';
import { ConfigError, DEVELOPMENT_KEY_SECRET, loadConfig } from '../../src/config/config.js';

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
      tokens: { accessTokenTtl: 600, refreshTokenTtl: 14 * 86400, clockSkew: 30 },
    });
    expect(config.dataDir.endsWith('/data')).toBe(true);
    expect(config.developmentDefaults).toEqual(['ISSUER', 'KEY_ENCRYPTION_SECRET']);
  });

  it('is frozen all the way down', () => {
    const config = loadConfig({});
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.tokens)).toBe(true);
    expect(() => {
      (config.tokens as { accessTokenTtl: number }).accessTokenTtl = 5;
    }).toThrow(TypeError);
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

  it('lists every problem at once', () => {
    expect(problemsOf({ PORT: 'eighty', DATABASE_URL: 'mysql://x', LOG_LEVEL: 'loud', TRUST_PROXY: 'maybe' })).toEqual([
      'PORT: must be an integer, got "eighty"',
      'LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent',
      'DATABASE_URL: must use postgres: or postgresql:',
      'TRUST_PROXY: must be true or false, got "maybe"',
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

  it('refuses weak bootstrap credentials', () => {
    expect(problemsOf({ BOOTSTRAP_ADMIN_PASSWORD: 'short', BOOTSTRAP_CLIENT_SECRET: 'also-short', KEY_ENCRYPTION_SECRET: 'tiny' })).toEqual([
      'KEY_ENCRYPTION_SECRET: must be at least 32 characters',
      'BOOTSTRAP_ADMIN_PASSWORD: must be at least 12 characters',
      'BOOTSTRAP_CLIENT_SECRET: must be at least 32 characters',
    ]);
  });
});
