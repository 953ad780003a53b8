import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routes } from '../../generated/routes.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';

// Every date-time query parameter in the contract, fed instants that RFC 3339's grammar, the calendar or an
// ECMAScript Date refuse: each answer is a 200 or a 400 naming the parameter, never a 500.

interface DateTimeParameter {
  operationId: string;
  path: string;
  name: string;
}

function dateTimeParameters(): DateTimeParameter[] {
  const found: DateTimeParameter[] = [];
  for (const route of routes) {
    if (route.method !== 'GET' || route.path.includes('{')) continue;
    const properties = (route.schema.querystring as { properties?: Record<string, { format?: string }> } | undefined)?.properties ?? {};
    for (const [name, schema] of Object.entries(properties)) {
      if (schema.format === 'date-time') found.push({ operationId: route.operationId, path: route.path, name });
    }
  }
  return found;
}

const REFUSED = [
  '2026-11-22T23:59:60Z', // a leap second: RFC 3339 grammar, but no Date can hold it
  '2016-12-31T23:59:60+00:00',
  '2026-11-22T24:00:00Z',
  '2026-13-01T00:00:00Z',
  '2026-02-30T00:00:00Z',
  '2026-11-22T10:60:00Z',
  '2026-11-22T10:00:00',
  '2026-11-22',
  '+275760-09-13T00:00:00Z',
  '2026-11-22T10:00:00+24:00',
  '2026-11-22T10:00:00.123456789012345678901234Z',
  'now',
  '',
  '2026-11-22T10:00:00Z\u0000',
];

// RFC 3339 §5.6 lets T and Z be lower case, and a space stand for T.
const ACCEPTED = ['2026-11-22T10:00:00Z', '2026-11-22t10:00:00z', '2026-11-22 10:00:00Z', '2026-11-22T10:00:00.123Z', '2026-11-22T10:00:00+05:30', '0001-01-01T00:00:00Z', '9999-12-31T23:59:59.999Z'];

describe.each(DATABASE_KINDS)('date-time parameters on %s', (kind) => {
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await startTestApp(kind, { RATE_LIMIT_MAX: '1000000', RATE_LIMIT_ANONYMOUS_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000' });
    token = await t.adminClientToken();
  });
  afterAll(() => t?.close());

  const parameters = dateTimeParameters();

  it('finds the date-time parameters of the contract', () => {
    expect(parameters.map((p) => `${p.operationId}.${p.name}`)).toEqual(['listAuditEvents.since', 'listAuditEvents.until']);
  });

  it('answers 400 VALIDATION_FAILED naming the parameter for every instant it cannot take', async () => {
    for (const { path, name } of parameters) {
      for (const value of REFUSED) {
        const res = await t.request({ url: `${path}?${name}=${encodeURIComponent(value)}`, token });
        expect({ value, status: res.statusCode, code: res.json().error?.code, paths: res.json().error?.details?.map((d: { path: string }) => d.path) }).toEqual({
          value,
          status: 400,
          code: 'VALIDATION_FAILED',
          paths: [`/query/${name}`],
        });
      }
    }
  });

  it('answers 200 for valid instants, offsets and fractions included', async () => {
    for (const { path, name } of parameters) {
      for (const value of ACCEPTED) {
        const res = await t.request({ url: `${path}?${name}=${encodeURIComponent(value)}`, token });
        expect({ value, status: res.statusCode }).toEqual({ value, status: 200 });
      }
    }
  });
});
