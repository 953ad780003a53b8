import fs from 'node:fs';
import YAML from 'yaml';
import { describe, expect, it } from 'vitest';
import { ApiError, ERROR_CODES } from '../../src/errors/registry.js';
import { renderRestError } from '../../src/errors/rest-renderer.js';

describe('error registry', () => {
  it('matches the README error table, code for code and status for status', () => {
    const readme = fs.readFileSync('README.md', 'utf8');
    const section = readme.slice(readme.indexOf('## Errors'), readme.indexOf('## The access model'));
    const rows = [...section.matchAll(/^\| `([A-Z_]+)` \| (\d{3}) \|/gm)].map((m) => [m[1], Number(m[2])]);
    expect(rows).toEqual(Object.entries(ERROR_CODES).map(([code, { status }]) => [code, status]));
  });

  it('matches the ErrorCode schema of the contract, which the Error schema names as an extensible set', () => {
    const doc = YAML.parse(fs.readFileSync('openapi.yaml', 'utf8'));
    expect([...doc.components.schemas.ErrorCode.enum].sort()).toEqual(Object.keys(ERROR_CODES).sort());
    const codeSchema = doc.components.schemas.Error.properties.error.properties.code;
    expect(codeSchema.anyOf).toEqual([
      { $ref: '#/components/schemas/ErrorCode' },
      { type: 'string', description: 'A code added after this release.', maxLength: 64, pattern: '^[A-Z][A-Z0-9_]*$' },
    ]);
    // Every code of the registry, and a code of a later release, is an error code.
    const pattern = new RegExp(codeSchema.anyOf[1].pattern);
    expect(Object.keys(ERROR_CODES).filter((code) => !pattern.test(code))).toEqual([]);
  });

  it('renders an unexpected error as INTERNAL without its message, stack or cause', () => {
    const rendered = renderRestError(new Error('relation "users" does not exist at /srv/app/src/x.ts:1'));
    expect(rendered).toEqual({ status: 500, headers: {}, body: { error: { code: 'INTERNAL', message: 'An internal error occurred.' } } });
  });

  it('renders an unreachable database as UNAVAILABLE, with Retry-After', () => {
    const error = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    expect(renderRestError(error)).toEqual({
      status: 503,
      headers: { 'retry-after': '2' },
      body: { error: { code: 'UNAVAILABLE', message: 'The service is temporarily unavailable.' } },
    });
  });

  it('renders SQLite’s lock held too long (SQLITE_BUSY and its extended codes) as UNAVAILABLE, and no other SQLite error', () => {
    const unavailable = { status: 503, headers: { 'retry-after': '2' }, body: { error: { code: 'UNAVAILABLE', message: 'The service is temporarily unavailable.' } } };
    for (const code of ['SQLITE_BUSY', 'SQLITE_BUSY_RECOVERY', 'SQLITE_BUSY_SNAPSHOT']) {
      expect(renderRestError(Object.assign(new Error('database is locked'), { code }))).toEqual(unavailable);
    }
    expect(renderRestError(Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' })).status).toBe(500);
  });

  it('gives every UNAVAILABLE a Retry-After, keeping one its thrower chose', () => {
    expect(new ApiError('UNAVAILABLE').headers).toEqual({ 'retry-after': '2' });
    expect(new ApiError('UNAVAILABLE', 'Closing.', { headers: { 'retry-after': '1', connection: 'close' } }).headers).toEqual({ 'retry-after': '1', connection: 'close' });
    expect(new ApiError('CONFLICT').headers).toEqual({});
  });

  it('renders validation details when present', () => {
    const rendered = renderRestError(new ApiError('VALIDATION_FAILED', 'Bad.', { details: [{ path: '/title', message: 'is required' }] }));
    expect(rendered.body).toEqual({ error: { code: 'VALIDATION_FAILED', message: 'Bad.', details: [{ path: '/title', message: 'is required' }] } });
  });
});
