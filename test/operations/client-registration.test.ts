import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVED_GRANT_TYPES } from '../../src/oauth/grant-types.js';
import { ADMIN_CLIENT_ID, ADMIN_CLIENT_REDIRECT_URI, startTestApp, type TestApp } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { INACTIVE_SUBJECT_CHALLENGE, INVALID_TOKEN, expectError, expectPrivateJson, startAccessApp } from '../access/support.js';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const DEVICE_CODE = 'urn:ietf:params:oauth:grant-type:device_code';

/** The 400 of a registration that breaks a rule beyond the schema (client-settings.ts). */
function refused(...details: { path: string; message: string }[]) {
  return { error: { code: 'VALIDATION_FAILED', message: 'The client registration is not valid.', details } };
}

/** The 400 of a registration that does not match the contract schema. */
function invalid(...details: { path: string; message: string }[]) {
  return { error: { code: 'VALIDATION_FAILED', message: 'The request does not match the contract.', details } };
}

const SERVICE = { name: 'Reporting', type: 'confidential', redirectUris: [], grantTypes: ['client_credentials'], scopes: ['read:posts'], role: 'member' };
const WEB_APP = { name: 'Web app', type: 'confidential', redirectUris: ['https://app.example.com/cb'], grantTypes: ['authorization_code', 'refresh_token'], scopes: ['openid', 'read:posts'] };
const SPA = { name: 'SPA', type: 'public', redirectUris: ['https://spa.example.com/cb'], grantTypes: ['authorization_code'], scopes: ['openid', 'read:posts'] };

/** What PUT needs beyond a creation body (it has no defaults for these). */
const REPLACE_DEFAULTS = { accessTokenFormat: 'jwt', accessTokenTtl: 600, firstParty: false, legacy: false };

describe('the client contract', () => {
  const { schemas } = JSON.parse(fs.readFileSync(new URL('../../generated/openapi.json', import.meta.url), 'utf8')).components;

  it('accepts exactly the grant types the server serves, implicit not among them', () => {
    expect(schemas.GrantType.enum).toEqual([...SERVED_GRANT_TYPES]);
    expect(SERVED_GRANT_TYPES).not.toContain('implicit');
  });

  it('accepts every role, or null, as a client role (the input enums are written out for one clear error)', () => {
    for (const input of ['ClientCreate', 'ClientReplace']) expect(schemas[input].properties.role.enum).toEqual([...schemas.Role.enum, null]);
  });
});

describe.each(DATABASE_KINDS)('client registration rules on %s', (kind) => {
  let t: TestApp;
  let admin: string;

  beforeAll(async () => {
    t = await startAccessApp(kind);
    admin = await t.adminClientToken();
  });
  afterAll(async () => {
    await t?.close();
  });

  async function countClients(): Promise<number> {
    const row = await t.database.db.kysely.selectFrom('clients').select((eb) => eb.fn.countAll<string | number>().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  const register = (body: unknown) => t.request({ method: 'POST', url: '/v1/clients', token: admin, body });

  /** POST is refused with exactly this body, and nothing is registered. */
  async function expectRefused(body: unknown, expected: unknown): Promise<void> {
    const before = await countClients();
    expectError(await register(body), 400, expected, null);
    expect(await countClients()).toBe(before);
  }

  /** The whole 201 body of a registration without a secret (public), or the view with the secret removed. */
  async function registered(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const res = await register(body);
    expect(res.statusCode, res.body).toBe(201);
    const { clientSecret: _secret, ...view } = res.json() as Record<string, unknown>;
    return view;
  }

  describe('grant types', () => {
    it('refuses a grant type the server does not serve (implicit, RFC 9700 §2.1.2)', async () => {
      await expectRefused(
        { ...SPA, grantTypes: ['authorization_code', 'implicit'] },
        invalid({ path: '/body/grantTypes/1', message: `must be one of authorization_code, refresh_token, client_credentials, ${DEVICE_CODE}, password` }),
      );
    });

    it('names the device code grant by its URN only: the CLI\'s short form device_code is not the contract\'s', async () => {
      await expectRefused(
        { name: 'TV', type: 'public', redirectUris: [], grantTypes: ['device_code'], scopes: ['read:posts'] },
        invalid({ path: '/body/grantTypes/0', message: `must be one of authorization_code, refresh_token, client_credentials, ${DEVICE_CODE}, password` }),
      );
    });

    it('refuses password for a client that is not legacy', async () => {
      await expectRefused({ ...WEB_APP, grantTypes: ['password'], redirectUris: [] }, refused({ path: '/body/grantTypes', message: 'only a legacy client may use password' }));
    });

    it('refuses password for a public client, legacy or not', async () => {
      await expectRefused(
        { ...SPA, redirectUris: [], grantTypes: ['password'], legacy: true },
        refused({ path: '/body/grantTypes', message: 'a public client cannot use password' }),
      );
    });

    it('registers password (with refresh_token) for a legacy confidential client', async () => {
      const view = await registered({ ...WEB_APP, redirectUris: [], grantTypes: ['password', 'refresh_token'], legacy: true });
      expect(view).toMatchObject({ grantTypes: ['password', 'refresh_token'], legacy: true, role: null });
    });

    it('refuses client_credentials for a public client', async () => {
      await expectRefused({ ...SERVICE, type: 'public' }, refused({ path: '/body/grantTypes', message: 'a public client cannot use client_credentials' }));
    });

    it('refuses refresh_token without a grant that issues one', async () => {
      const message = `refresh_token needs a grant that issues one: authorization_code, ${DEVICE_CODE}, password`;
      await expectRefused({ ...WEB_APP, redirectUris: [], grantTypes: ['refresh_token'] }, refused({ path: '/body/grantTypes', message }));
      await expectRefused({ ...SERVICE, grantTypes: ['client_credentials', 'refresh_token'] }, refused({ path: '/body/grantTypes', message }));
    });

    it('refuses refresh_token for a public client with an https redirect URI (a browser-based app renews with prompt=none)', async () => {
      await expectRefused(
        { ...SPA, grantTypes: ['authorization_code', 'refresh_token'], redirectUris: ['com.example.app:/cb', 'https://spa.example.com/cb'] },
        refused({ path: '/body/grantTypes', message: 'a public client with an https redirect URI runs in a browser and cannot use refresh_token; it renews with prompt=none' }),
      );
    });
  });

  describe('role', () => {
    it('refuses a client_credentials client without a role', async () => {
      const { role: _role, ...withoutRole } = SERVICE;
      await expectRefused(withoutRole, refused({ path: '/body/role', message: 'is required with client_credentials' }));
      await expectRefused({ ...SERVICE, role: null }, refused({ path: '/body/role', message: 'is required with client_credentials' }));
    });

    it('refuses a role that is not one', async () => {
      await expectRefused({ ...SERVICE, role: 'owner' }, invalid({ path: '/body/role', message: 'must be one of admin, editor, member, null' }));
    });

    it('refuses a role on a client without client_credentials (it would change nothing)', async () => {
      await expectRefused({ ...WEB_APP, role: 'member' }, refused({ path: '/body/role', message: 'is used only with client_credentials' }));
    });

    it('registers a confidential user-facing client without a role: role is null, stored as NULL', async () => {
      for (const body of [WEB_APP, { ...WEB_APP, role: null }]) {
        const view = await registered(body);
        expect(view).toEqual({
          id: expect.any(String),
          clientId: expect.stringMatching(/^client-[0-9a-f]+$/),
          name: 'Web app',
          type: 'confidential',
          redirectUris: ['https://app.example.com/cb'],
          postLogoutRedirectUris: [],
          grantTypes: ['authorization_code', 'refresh_token'],
          scopes: ['openid', 'read:posts'],
          role: null,
          accessTokenFormat: 'jwt',
          accessTokenTtl: 600,
          rateLimit: null,
          idTokenSignedResponseAlg: 'RS256',
          firstParty: false,
          legacy: false,
          createdAt: expect.stringMatching(ISO),
        });
        const row = await t.database.db.kysely.selectFrom('clients').select('role').where('id', '=', view.id as string).executeTakeFirstOrThrow();
        expect(row.role).toBeNull();
        expectPrivateJson(await t.request({ url: `/v1/clients/${view.id as string}`, token: admin }), view);
      }
    });

    it('keeps the bootstrap admin client valid: client_credentials in the admin role', async () => {
      const list = await t.request({ url: '/v1/clients?limit=100', token: admin });
      const listed = (list.json() as { data: Record<string, unknown>[] }).data.find((c) => c.clientId === ADMIN_CLIENT_ID)!;
      // The test app registers the admin client for authorization_code too, with a redirect URI (the suites'
      // user tokens belong to it); the bootstrap's registration is the same less that grant and that URI.
      expect(listed).toMatchObject({ grantTypes: ['client_credentials', 'authorization_code'], role: 'admin', redirectUris: [ADMIN_CLIENT_REDIRECT_URI], postLogoutRedirectUris: [], idTokenSignedResponseAlg: 'RS256' });
      const { id, clientId: _clientId, createdAt: _createdAt, ...registration } = listed;
      const bootstrapped = { ...registration, grantTypes: ['client_credentials'], redirectUris: [] };
      for (const body of [bootstrapped, registration]) {
        const put = await t.request({ method: 'PUT', url: `/v1/clients/${id as string}`, token: admin, body });
        expect(put.statusCode, put.body).toBe(200);
      }
    });
  });

  describe('public clients', () => {
    it('registers a single-page app without refresh_token, with post-logout redirect URIs', async () => {
      const view = await registered({ ...SPA, postLogoutRedirectUris: ['https://spa.example.com/'] });
      expect(view).toEqual({
        id: expect.any(String),
        clientId: expect.stringMatching(/^client-[0-9a-f]+$/),
        name: 'SPA',
        type: 'public',
        redirectUris: ['https://spa.example.com/cb'],
        postLogoutRedirectUris: ['https://spa.example.com/'],
        grantTypes: ['authorization_code'],
        scopes: ['openid', 'read:posts'],
        role: null,
        accessTokenFormat: 'jwt',
        accessTokenTtl: 600,
        rateLimit: null,
        idTokenSignedResponseAlg: 'RS256',
        firstParty: false,
        legacy: false,
        createdAt: expect.stringMatching(ISO),
      });
      expectPrivateJson(await t.request({ url: `/v1/clients/${view.id as string}`, token: admin }), view);
    });

    it('registers a native app (loopback and private-use redirect URIs, RFC 8252) with refresh_token and ES256 ID tokens', async () => {
      const redirectUris = ['http://127.0.0.1:8400/cb', 'http://[::1]/cb', 'com.example.app:/oauth2redirect'];
      const view = await registered({
        ...SPA,
        name: 'Native',
        redirectUris,
        postLogoutRedirectUris: ['com.example.app:/signed-out'],
        grantTypes: ['authorization_code', 'refresh_token'],
        idTokenSignedResponseAlg: 'ES256',
      });
      expect(view).toMatchObject({ redirectUris, postLogoutRedirectUris: ['com.example.app:/signed-out'], grantTypes: ['authorization_code', 'refresh_token'], idTokenSignedResponseAlg: 'ES256', role: null });
      const row = await t.database.db.kysely.selectFrom('clients').selectAll().where('id', '=', view.id as string).executeTakeFirstOrThrow();
      expect({ postLogout: JSON.parse(row.postLogoutRedirectUris), alg: row.idTokenSignedResponseAlg, secret: row.secretHash }).toEqual({
        postLogout: ['com.example.app:/signed-out'],
        alg: 'ES256',
        secret: null,
      });
    });

    it('registers a device-only public client (no redirect URIs) with refresh_token', async () => {
      const view = await registered({ ...SPA, name: 'TV', redirectUris: [], grantTypes: [DEVICE_CODE, 'refresh_token'] });
      expect(view).toMatchObject({ type: 'public', redirectUris: [], grantTypes: [DEVICE_CODE, 'refresh_token'], role: null });
      // A client that may not have redirect URIs need not name an empty list.
      const { redirectUris: _none, ...withoutUris } = { ...SPA, name: 'TV 2', grantTypes: [DEVICE_CODE, 'refresh_token'] };
      expect(await registered(withoutUris)).toMatchObject({ name: 'TV 2', redirectUris: [], grantTypes: [DEVICE_CODE, 'refresh_token'] });
    });
  });

  describe('redirect URIs', () => {
    it('refuses redirect URIs that are not https, loopback http or a private-use scheme, with a fragment, userinfo or a wildcard', async () => {
      const uris = [
        'http://app.example.com/cb',
        'http://localhost:8080/cb',
        'http://127.1/cb',
        'https://app.example.com/cb#top',
        'https://*.example.com/cb',
        'https://app.example.com/*',
        'https://user:pw@app.example.com/cb',
        'https:///cb',
        'javascript:alert(1)',
        'data:text/html,hi',
        'file:///etc/passwd',
        'myapp:/cb',
      ];
      const http = 'may use http only on the loopback addresses 127.0.0.1 and [::1] (not localhost)';
      const scheme = 'must use https, http on a loopback address, or a private-use scheme such as com.example.app';
      const wildcard = 'must not contain a wildcard: redirect URIs are matched exactly';
      const messages = [http, http, http, 'must not have a fragment', wildcard, wildcard, 'must not contain user information', 'must name a host', scheme, scheme, scheme, scheme];
      await expectRefused({ ...SPA, redirectUris: uris }, refused(...messages.map((message, i) => ({ path: `/body/redirectUris/${i}`, message }))));
    });

    it('refuses what the contract bounds: not a URI, duplicates, more than 20, longer than 2000 characters', async () => {
      await expectRefused({ ...SPA, redirectUris: ['/cb'] }, invalid({ path: '/body/redirectUris/0', message: 'must match format "uri"' }));
      await expectRefused(
        { ...SPA, redirectUris: ['https://spa.example.com/cb', 'https://spa.example.com/cb'] },
        invalid({ path: '/body/redirectUris', message: 'must NOT have duplicate items (items ## 1 and 0 are identical)' }),
      );
      const many = Array.from({ length: 21 }, (_, i) => `https://spa.example.com/cb${i}`);
      await expectRefused({ ...SPA, redirectUris: many }, invalid({ path: '/body/redirectUris', message: 'must NOT have more than 20 items' }));
      await expectRefused({ ...SPA, redirectUris: [`https://spa.example.com/${'a'.repeat(2000)}`] }, invalid({ path: '/body/redirectUris/0', message: 'must NOT have more than 2000 characters' }));
    });

    it('requires a redirect URI with authorization_code, and refuses one without it', async () => {
      await expectRefused({ ...SPA, redirectUris: [] }, refused({ path: '/body/redirectUris', message: 'authorization_code needs at least one redirect URI' }));
      await expectRefused({ ...SERVICE, redirectUris: ['https://app.example.com/cb'] }, refused({ path: '/body/redirectUris', message: 'are used only with authorization_code' }));
    });

    it('holds post-logout redirect URIs to the same rules, and only with authorization_code', async () => {
      await expectRefused(
        { ...SPA, postLogoutRedirectUris: ['https://spa.example.com/', 'http://spa.example.com/', 'javascript:alert(1)'] },
        refused(
          { path: '/body/postLogoutRedirectUris/1', message: 'may use http only on the loopback addresses 127.0.0.1 and [::1] (not localhost)' },
          { path: '/body/postLogoutRedirectUris/2', message: 'must use https, http on a loopback address, or a private-use scheme such as com.example.app' },
        ),
      );
      await expectRefused(
        { ...SPA, redirectUris: [], grantTypes: [DEVICE_CODE], postLogoutRedirectUris: ['https://tv.example.com/'] },
        refused({ path: '/body/postLogoutRedirectUris', message: 'are used only with authorization_code' }),
      );
    });

    it('refuses an ID token algorithm other than RS256 and ES256', async () => {
      await expectRefused({ ...SPA, idTokenSignedResponseAlg: 'HS256' }, invalid({ path: '/body/idTokenSignedResponseAlg', message: 'must be one of RS256, ES256' }));
    });
  });

  describe('PUT /v1/clients/{id}', () => {
    async function createSpa(): Promise<{ id: string; clientId: string; createdAt: string }> {
      return (await registered(SPA)) as { id: string; clientId: string; createdAt: string };
    }

    const replace = (id: string, body: unknown) => t.request({ method: 'PUT', url: `/v1/clients/${id}`, token: admin, body });

    it('applies the same rules, changing nothing when refused', async () => {
      const { id } = await createSpa();
      const before = await t.request({ url: `/v1/clients/${id}`, token: admin });
      const cases: [unknown, unknown][] = [
        [{ ...SPA, ...REPLACE_DEFAULTS, grantTypes: ['authorization_code', 'refresh_token'] }, refused({ path: '/body/grantTypes', message: 'a public client with an https redirect URI runs in a browser and cannot use refresh_token; it renews with prompt=none' })],
        [{ ...SPA, ...REPLACE_DEFAULTS, role: 'admin' }, refused({ path: '/body/role', message: 'is used only with client_credentials' })],
        [{ ...SPA, ...REPLACE_DEFAULTS, redirectUris: ['http://spa.example.com/cb'] }, refused({ path: '/body/redirectUris/0', message: 'may use http only on the loopback addresses 127.0.0.1 and [::1] (not localhost)' })],
        [{ ...SPA, ...REPLACE_DEFAULTS, grantTypes: ['authorization_code', 'implicit'] }, invalid({ path: '/body/grantTypes/1', message: `must be one of authorization_code, refresh_token, client_credentials, ${DEVICE_CODE}, password` })],
        [{ ...SPA, ...REPLACE_DEFAULTS, type: 'confidential' }, { error: { code: 'VALIDATION_FAILED', message: 'A client type cannot change.', details: [{ path: '/body/type', message: 'is immutable' }] } }],
      ];
      for (const [body, expected] of cases) expectError(await replace(id, body), 400, expected, null);
      expectPrivateJson(await t.request({ url: `/v1/clients/${id}`, token: admin }), before.json());
    });

    it('stores and returns post-logout redirect URIs and the ID token algorithm; what it leaves out takes its default', async () => {
      const { id, clientId, createdAt } = await createSpa();
      const changed = { ...SPA, ...REPLACE_DEFAULTS, postLogoutRedirectUris: ['https://spa.example.com/bye'], idTokenSignedResponseAlg: 'ES256' };
      const view = { id, clientId, createdAt, ...changed, role: null, rateLimit: null };
      const put = await replace(id, changed);
      expect({ status: put.statusCode, body: put.json() }).toEqual({ status: 200, body: view });
      expectPrivateJson(await t.request({ url: `/v1/clients/${id}`, token: admin }), view);

      const reset = await replace(id, { ...SPA, ...REPLACE_DEFAULTS, role: null });
      expect({ status: reset.statusCode, body: reset.json() }).toEqual({ status: 200, body: { ...view, postLogoutRedirectUris: [], idTokenSignedResponseAlg: 'RS256' } });
    });

    it('ends a client’s own tokens at once when it gives up client_credentials and its role', async () => {
      const created = await register({ ...SERVICE, scopes: ['read:posts', 'openid'] });
      expect(created.statusCode, created.body).toBe(201);
      const client = created.json() as { id: string; clientId: string; clientSecret: string };
      const issued = await t.app.fastify.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ grant_type: 'client_credentials', client_id: client.clientId, client_secret: client.clientSecret }).toString(),
      });
      expect(issued.statusCode, issued.body).toBe(200);
      const token = (JSON.parse(issued.body) as { access_token: string }).access_token;
      expect((await t.request({ url: '/v1/posts', token })).statusCode).toBe(200);

      const put = await replace(client.id, { ...WEB_APP, ...REPLACE_DEFAULTS, scopes: ['read:posts', 'openid'] });
      expect(put.statusCode, put.body).toBe(200);
      expect(put.json()).toMatchObject({ grantTypes: ['authorization_code', 'refresh_token'], role: null });
      expectError(await t.request({ url: '/v1/posts', token }), 401, INVALID_TOKEN, INACTIVE_SUBJECT_CHALLENGE);
    });

    it('records an invalidation for every replacement, so servers re-read the registration', async () => {
      const { id, clientId } = await createSpa();
      const invalidations = () =>
        t.database.db.kysely.selectFrom('invalidations').select('seq').where('kind', '=', 'client').where('target', '=', clientId).execute().then((rows) => rows.length);
      const before = await invalidations();
      expect((await replace(id, { ...SPA, ...REPLACE_DEFAULTS, scopes: ['openid'] })).statusCode).toBe(200);
      expect(await invalidations()).toBe(before + 1);
    });
  });
});

describe.each(DATABASE_KINDS)('the default access-token lifetime on %s', (kind) => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp(kind, { ACCESS_TOKEN_TTL: '300' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('is ACCESS_TOKEN_TTL for a client registered without one, and what the client sets otherwise; its tokens live that long', async () => {
    const admin = await t.adminClientToken();
    const register = (body: unknown) => t.request({ method: 'POST', url: '/v1/clients', token: admin, body });
    const plain = await register({ ...SERVICE, clientId: 'default-ttl' });
    expect(plain.statusCode, plain.body).toBe(201);
    expect(plain.json()).toMatchObject({ clientId: 'default-ttl', accessTokenTtl: 300 });
    const own = await register({ ...SERVICE, clientId: 'own-ttl', accessTokenTtl: 900 });
    expect(own.json()).toMatchObject({ clientId: 'own-ttl', accessTokenTtl: 900 });
    const token = await t.app.fastify.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`default-ttl:${plain.json().clientSecret}`).toString('base64')}` },
      payload: 'grant_type=client_credentials&scope=read%3Aposts',
    });
    expect(token.statusCode, token.body).toBe(200);
    expect(token.json()).toMatchObject({ token_type: 'Bearer', expires_in: 300, scope: 'read:posts' });
  });
});
