import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { createClient, type TestClient } from '../fixtures.js';
import { basic, form, FORM } from '../oauth-app.js';

// Anyone can call /oauth/revoke: without credentials, with wrong ones, or as a public client, which names
// itself with its client_id alone. None of that may add an audit row per request (README, "Anonymous
// callers are bounded"): such requests are counted per address and window, and the counts add up.

const REQUESTS = 12;

const byReasonAndClient = (a: { reason: string; clientId: string | null }, b: { reason: string; clientId: string | null }) =>
  a.reason.localeCompare(b.reason) || (a.clientId ?? '').localeCompare(b.clientId ?? '');

describe.each(DATABASE_KINDS)('audit rows of anonymous revocation requests on %s', (kind) => {
  let t: TestApp;
  let confidential: TestClient;
  let spa: TestClient;

  beforeAll(async () => {
    t = await startTestApp(kind, { AUDIT_FAILURE_WINDOW: '1' });
    confidential = await createClient(t.database.db);
    spa = await createClient(t.database.db, {
      type: 'public',
      secretHash: null,
      grantTypes: ['authorization_code'],
      redirectUris: ['https://spa.example/cb'],
      scopes: ['read:posts'],
      role: null,
    });
  });
  afterAll(async () => {
    await t?.close();
  });

  const revoke = (remoteAddress: string, params: Record<string, string>, headers: Record<string, string> = {}) =>
    t.app.fastify.inject({ method: 'POST', url: '/oauth/revoke', remoteAddress, headers: { ...FORM, ...headers }, payload: form(params) });

  /** The revocation events from one address once its window has closed. */
  async function revokeEventsFrom(address: string, groups: number) {
    return vi.waitFor(
      async () => {
        await t.app.audit.flush();
        const rows = await t.database.db.kysely
          .selectFrom('auditEvents')
          .select(['requestId', 'subject', 'clientId', 'operation', 'resourceType', 'resourceId', 'decision', 'reason', 'count', 'sourceAddress'])
          .where('operation', '=', 'revoke')
          .where('sourceAddress', '=', address)
          .execute();
        if (rows.length < groups) throw new Error(`${rows.length} of ${groups} aggregated events from ${address}`);
        return rows.sort(byReasonAndClient);
      },
      { timeout: 8000, interval: 100 },
    );
  }

  it('writes one counted event per address and kind of refusal, however many requests came', async () => {
    const address = '192.0.2.71';
    const before = await t.database.db.kysely.selectFrom('auditEvents').select('id').where('operation', '=', 'revoke').execute();
    for (let i = 0; i < REQUESTS; i++) {
      const replies = await Promise.all([
        revoke(address, { token: `no-client-${i}` }),
        revoke(address, { token: `wrong-secret-${i}` }, { authorization: basic(confidential.client.clientId, 'not-the-secret') }),
        revoke(address, { token: `nothing-${i}`, client_id: spa.client.clientId }),
      ]);
      const [anonymous, wrongSecret, publicClient] = replies;
      expect({ status: anonymous!.statusCode, error: anonymous!.json().error }).toEqual({ status: 401, error: 'invalid_client' });
      expect({ status: wrongSecret!.statusCode, error: wrongSecret!.json().error }).toEqual({ status: 401, error: 'invalid_client' });
      expect({ status: publicClient!.statusCode, body: publicClient!.body }).toEqual({ status: 200, body: '' });
    }
    const aggregated = { requestId: null, subject: null, operation: 'revoke', resourceId: null, decision: 'deny', count: REQUESTS, sourceAddress: address };
    expect(await revokeEventsFrom(address, 3)).toEqual(
      [
        { ...aggregated, clientId: null, resourceType: null, reason: 'authentication' },
        { ...aggregated, clientId: confidential.client.clientId, resourceType: null, reason: 'authentication' },
        { ...aggregated, clientId: spa.client.clientId, resourceType: null, reason: 'resource' },
      ].sort(byReasonAndClient),
    );
    // Nothing else was written about these requests: no row per request, from this address or without one.
    const after = await t.database.db.kysely.selectFrom('auditEvents').select(['id', 'sourceAddress']).where('operation', '=', 'revoke').execute();
    expect(after.length - before.length).toBe(3);
  });
});
