import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../../src/config/config.js';
import { revokeClientTokens } from '../../../src/oauth/tokens/access-token-records.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../../helpers/databases.js';
import { createClient, makeConfig, type TestClient } from '../fixtures.js';
import { basic, buildOAuthApp, form, FORM, type OAuthApp } from '../oauth-app.js';

// RFC 7662 for client-credentials JWTs, which have no row: introspection answers from the token's claims
// and its client's registration as it is now, so a token that no longer works is inactive, whatever ended it.

describe.each(DATABASE_KINDS)('POST /oauth/introspect of self-contained JWTs on %s', (kind) => {
  let t: TestDatabase;
  let config: Config;
  let oauth: OAuthApp;

  beforeAll(async () => {
    t = await createTestDatabase(kind);
    config = makeConfig();
    oauth = await buildOAuthApp(t.db, config);
  });
  afterAll(async () => {
    await oauth.app.close();
    await t.drop();
  });

  const as = (client: TestClient) => ({ authorization: basic(client.client.clientId, client.secret) });

  async function tokenFor(client: TestClient): Promise<string> {
    const res = await oauth.app.inject({ method: 'POST', url: '/oauth/token', headers: { ...FORM, ...as(client) }, payload: form({ grant_type: 'client_credentials' }) });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().access_token as string;
  }

  async function introspect(token: string, client: TestClient): Promise<Record<string, unknown>> {
    const res = await oauth.app.inject({ method: 'POST', url: '/oauth/introspect', headers: { ...FORM, ...as(client) }, payload: form({ token }) });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as Record<string, unknown>;
  }

  it('describes the client’s own live token, and to no other client', async () => {
    const service = await createClient(t.db);
    const neighbour = await createClient(t.db);
    const token = await tokenFor(service);
    const { jti } = decodeJwt(token);
    expect(await introspect(token, service)).toMatchObject({ active: true, client_id: service.client.clientId, sub: service.client.clientId, jti });
    expect(await introspect(token, neighbour)).toEqual({ active: false });
  });

  it('is inactive once the token was revoked by itself', async () => {
    const service = await createClient(t.db);
    const token = await tokenFor(service);
    const revoked = await oauth.app.inject({ method: 'POST', url: '/oauth/revoke', headers: { ...FORM, ...as(service) }, payload: form({ token }) });
    expect(revoked.statusCode).toBe(200);
    expect(await introspect(token, service)).toEqual({ active: false });
  });

  it("is inactive once its client's tokens were revoked, while a token issued after that is active", async () => {
    const service = await createClient(t.db);
    const token = await tokenFor(service);
    await t.db.kysely.transaction().execute((trx) => revokeClientTokens(trx, service.client.clientId, new Date().toISOString()));
    await oauth.invalidations.poll();
    expect(await introspect(token, service)).toEqual({ active: false });
    const next = await tokenFor(service);
    expect(decodeJwt(next)).toMatchObject({ reg: service.client.id, rev: 1 });
    expect(await introspect(next, service)).toMatchObject({ active: true });
  });

  it('is inactive for the client_id registered again after its deletion, and its own new token is active', async () => {
    const first = await createClient(t.db);
    const token = await tokenFor(first);
    await t.db.kysely.transaction().execute(async (trx) => {
      await revokeClientTokens(trx, first.client.clientId, new Date().toISOString());
      await trx.deleteFrom('clients').where('id', '=', first.client.id).execute();
    });
    const again = await createClient(t.db, { clientId: first.client.clientId });
    await oauth.invalidations.poll();
    expect(await introspect(token, again)).toEqual({ active: false });
    // Its revocation count starts at 0 again, as the old token's did: the registration id still tells them apart.
    const next = await tokenFor(again);
    expect(decodeJwt(next)).toMatchObject({ reg: again.client.id, rev: 0 });
    expect(decodeJwt(token)).toMatchObject({ reg: first.client.id, rev: 0 });
    expect(await introspect(next, again)).toMatchObject({ active: true });
  });

  it("mints under the current count on an instance that still held the registration from before its client's tokens were revoked", async () => {
    const service = await createClient(t.db);
    await oauth.invalidations.stop();
    try {
      const old = await tokenFor(service); // the registration is held in memory from here on
      // The count alone moves: the secret and updatedAt stay as they were.
      await t.db.kysely.transaction().execute((trx) => revokeClientTokens(trx, service.client.clientId, new Date().toISOString()));
      const token = await tokenFor(service);
      expect(decodeJwt(token)).toMatchObject({ reg: service.client.id, rev: 1 });
      expect(await introspect(token, service)).toMatchObject({ active: true });
      expect(await introspect(old, service)).toEqual({ active: false });
    } finally {
      await oauth.invalidations.start();
    }
  });
});
