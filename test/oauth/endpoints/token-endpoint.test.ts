import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { sql } from 'kysely';
import type { Config } from '../../../src/config/config.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../../helpers/databases.js';
import { createClient, makeConfig, type TestClient } from '../fixtures.js';
import { basic, buildOAuthApp, form, FORM, type OAuthApp } from '../oauth-app.js';
import { digestSecret } from '../../../src/oauth/secrets.js';
import { revokeClientTokens } from '../../../src/oauth/tokens/access-token-records.js';

const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };
const CHALLENGE = 'Basic realm="portcullis"';

describe.each(DATABASE_KINDS)('POST /oauth/token on %s', (kind) => {
  let t: TestDatabase;
  let config: Config;
  let oauth: OAuthApp;
  let service: TestClient;

  beforeAll(async () => {
    t = await createTestDatabase(kind);
    config = makeConfig();
    oauth = await buildOAuthApp(t.db, config);
    service = await createClient(t.db);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });
  afterAll(async () => {
    await oauth.app.close();
    await t.drop();
  });

  function asService(): Record<string, string> {
    return { authorization: basic(service.client.clientId, service.secret) };
  }

  function requestToken(params: Record<string, string>, headers: Record<string, string> = {}) {
    return oauth.app.inject({ method: 'POST', url: '/oauth/token', headers: { ...FORM, ...headers }, payload: form(params) });
  }

  function expectError(response: Awaited<ReturnType<typeof requestToken>>, status: number, error: string, description: string) {
    expect(response.statusCode).toBe(status);
    expect(response.headers).toMatchObject(NO_STORE);
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    expect(response.json()).toEqual({ error, error_description: description });
  }

  describe('issues a token', () => {
    it('to a client authenticating with client_secret_basic', async () => {
      const response = await requestToken({ grant_type: 'client_credentials' }, asService());
      expect(response.statusCode).toBe(200);
      expect(response.headers).toMatchObject(NO_STORE);
      expect(response.headers['content-type']).toMatch(/^application\/json/);
      const body = response.json();
      expect(body).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 600, scope: 'read:posts write:posts' });
      await expect(oauth.tokens.verifyAccessToken(body.access_token)).resolves.toMatchObject({
        format: 'jwt',
        clientId: service.client.clientId,
        subject: service.client.clientId,
        subjectType: 'client',
        scopes: ['read:posts', 'write:posts'],
        grantType: 'client_credentials',
      });
    });

    it('to a client authenticating with client_secret_post, for the scope it asks', async () => {
      const response = await requestToken({
        grant_type: 'client_credentials',
        client_id: service.client.clientId,
        client_secret: service.secret,
        scope: 'read:posts',
      });
      expect(response.statusCode).toBe(200);
      expect(response.headers).toMatchObject(NO_STORE);
      expect(response.json()).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 600, scope: 'read:posts' });
    });

    it('decoding form-urlencoded Basic credentials (RFC 6749 §2.3.1)', async () => {
      const odd = await createClient(t.db, { clientId: `svc:reports %+é ${Date.now()}` });
      const response = await requestToken({ grant_type: 'client_credentials' }, { authorization: basic(odd.client.clientId, odd.secret) });
      expect(response.statusCode).toBe(200);
    });

    it('in the client’s format and with its lifetime clamped to 300..3600 s', async () => {
      const opaque = await createClient(t.db, { accessTokenFormat: 'opaque', accessTokenTtl: 86400 });
      const response = await requestToken({ grant_type: 'client_credentials' }, { authorization: basic(opaque.client.clientId, opaque.secret) });
      const body = response.json();
      expect(body).toEqual({
        access_token: expect.stringMatching(/^[0-9a-f]{12}[A-Za-z0-9_-]{43}$/),
        token_type: 'Bearer',
        expires_in: 3600,
        scope: 'read:posts write:posts',
      });
      await expect(oauth.tokens.verifyAccessToken(body.access_token)).resolves.toMatchObject({ format: 'opaque' });
    });
  });

  describe('refuses', () => {
    it('a wrong secret with 401 invalid_client and a Basic challenge', async () => {
      const wrong = { authorization: basic(service.client.clientId, 'wrong-secret') };
      const response = await requestToken({ grant_type: 'client_credentials' }, wrong);
      expectError(response, 401, 'invalid_client', 'Client authentication failed.');
      expect(response.headers['www-authenticate']).toBe(CHALLENGE);
    });

    it('a token for a secret rotated with its tokens revoked (by another process) while this one still held the old registration: nothing stored, 401', async () => {
      const leaked = await createClient(t.db);
      const oldSecret = { authorization: basic(leaked.client.clientId, leaked.secret) };
      await oauth.invalidations.poll(); // the registration's creation is followed now, not after it is held
      // The registration is held in memory from here on.
      expect((await requestToken({ grant_type: 'client_credentials' }, oldSecret)).statusCode).toBe(200);
      // This process has not yet heard of the rotation (its invalidation feed runs four times a second).
      await oauth.invalidations.stop();
      try {
        const newSecret = 'the-secret-issued-by-the-rotation-0123456789';
        await t.db.kysely.transaction().execute(async (trx) => {
          await trx.updateTable('clients').set({ secretHash: digestSecret(newSecret), updatedAt: '2099-01-01T00:00:00.000Z' }).where('id', '=', leaked.client.id).execute();
          await revokeClientTokens(trx, leaked.client.clientId, new Date().toISOString());
        });
        const recorded = oauth.decisions.length;
        // Authenticated against the held registration, refused at the commit, taken again against the
        // registration as it is now: the old secret fails there.
        const raced = await requestToken({ grant_type: 'client_credentials' }, oldSecret);
        expectError(raced, 401, 'invalid_client', 'Client authentication failed.');
        expect(oauth.decisions.slice(recorded)).toMatchObject([{ operation: 'token', clientId: leaked.client.clientId, decision: 'deny', reason: 'authentication' }]);
        const live = await t.db.kysely.selectFrom('accessTokens').select('jti').where('clientId', '=', leaked.client.clientId).where('revokedAt', 'is', null).execute();
        expect(live).toEqual([]);
        expectError(await requestToken({ grant_type: 'client_credentials' }, oldSecret), 401, 'invalid_client', 'Client authentication failed.');
        expect((await requestToken({ grant_type: 'client_credentials' }, { authorization: basic(leaked.client.clientId, newSecret) })).statusCode).toBe(200);
      } finally {
        await oauth.invalidations.start();
      }
    });

    it('takes a request refused at the commit for a changed registration once more, against the registration as it is now', async () => {
      const narrowed = await createClient(t.db, { scopes: ['read:posts', 'read:comments'] });
      const headers = { authorization: basic(narrowed.client.clientId, narrowed.secret) };
      await oauth.invalidations.poll(); // the registration's creation is followed now, not after it is held
      expect((await requestToken({ grant_type: 'client_credentials' }, headers)).statusCode).toBe(200);
      await oauth.invalidations.stop();
      try {
        await t.db.kysely.updateTable('clients').set({ scopes: JSON.stringify(['read:comments']), updatedAt: '2099-01-01T00:00:00.000Z' }).where('id', '=', narrowed.client.id).execute();
        const answer = await requestToken({ grant_type: 'client_credentials' }, headers);
        expect(answer.statusCode).toBe(200);
        expect(answer.json()).toMatchObject({ token_type: 'Bearer', scope: 'read:comments' });
      } finally {
        await oauth.invalidations.start();
      }
    });

    it('a wrong secret sent with client_secret_post', async () => {
      const params = { grant_type: 'client_credentials', client_id: service.client.clientId, client_secret: 'wrong-secret' };
      const response = await requestToken(params);
      expectError(response, 401, 'invalid_client', 'Client authentication failed.');
    });

    it('an unknown client', async () => {
      const response = await requestToken({ grant_type: 'client_credentials' }, { authorization: basic('nobody', service.secret) });
      expectError(response, 401, 'invalid_client', 'Client authentication failed.');
      expect(response.headers['www-authenticate']).toBe(CHALLENGE);
    });

    it('a request without client authentication, saying how each kind of client identifies itself', async () => {
      const response = await requestToken({ grant_type: 'client_credentials' });
      expectError(response, 401, 'invalid_client', 'client_id is required (a public client sends it in the body; a confidential client authenticates with HTTP Basic).');
      expect(response.headers['www-authenticate']).toBe(CHALLENGE);
    });

    it('a confidential client identified by client_id alone', async () => {
      const response = await requestToken({ grant_type: 'client_credentials', client_id: service.client.clientId });
      expectError(response, 401, 'invalid_client', 'Client authentication is required.');
    });

    it('a malformed Basic header', async () => {
      const response = await requestToken({ grant_type: 'client_credentials' }, { authorization: 'Basic not-base64!' });
      expectError(response, 401, 'invalid_client', 'The Authorization header must use the Basic scheme.');
    });

    it('Basic credentials that are not UTF-8, rather than a secret of replacement characters', async () => {
      const bytes = Buffer.concat([Buffer.from(`${service.client.clientId}:`), Buffer.from([0xff, 0xfe])]).toString('base64');
      const response = await requestToken({ grant_type: 'client_credentials' }, { authorization: `Basic ${bytes}` });
      expectError(response, 401, 'invalid_client', 'The Basic credentials are malformed.');
    });

    it('both client authentication methods at once', async () => {
      const response = await requestToken(
        { grant_type: 'client_credentials', client_id: service.client.clientId, client_secret: service.secret },
        asService(),
      );
      expectError(response, 400, 'invalid_request', 'Use one client authentication method, not two.');
    });

    it('an unknown grant_type', async () => {
      const response = await requestToken({ grant_type: 'urn:example:magic' }, asService());
      expectError(response, 400, 'unsupported_grant_type', 'The grant_type is not supported by this server.');
    });

    it('the password grant, which this server does not offer', async () => {
      const response = await requestToken({ grant_type: 'password', username: 'a', password: 'b' }, asService());
      expectError(response, 400, 'unsupported_grant_type', 'The grant_type is not supported by this server.');
    });

    it('a missing grant_type', async () => {
      const response = await requestToken({ scope: 'read:posts' }, asService());
      expectError(response, 400, 'invalid_request', 'grant_type is required.');
    });

    it('a grant_type sent without a value, which counts as missing (RFC 6749 §3.2)', async () => {
      const response = await requestToken({ grant_type: '' }, asService());
      expectError(response, 400, 'invalid_request', 'grant_type is required.');
    });

    it('a scope the client is not allowed', async () => {
      const response = await requestToken({ grant_type: 'client_credentials', scope: 'read:posts read:users' }, asService());
      expectError(response, 400, 'invalid_scope', 'The client may not request: read:users.');
    });

    it('a JSON body', async () => {
      const response = await oauth.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/json', authorization: basic(service.client.clientId, service.secret) },
        payload: JSON.stringify({ grant_type: 'client_credentials' }),
      });
      expectError(response, 415, 'invalid_request', 'The request body must be application/x-www-form-urlencoded.');
    });

    it('a request without a body, which is an empty form', async () => {
      const response = await oauth.app.inject({ method: 'POST', url: '/oauth/token', headers: asService() });
      expectError(response, 400, 'invalid_request', 'grant_type is required.');
    });

    it('a body over the size limit', async () => {
      const response = await requestToken({ grant_type: 'client_credentials', padding: 'x'.repeat(1024 * 1024) }, asService());
      expectError(response, 413, 'invalid_request', 'The request body is larger than 65536 bytes.');
    });

    it('a repeated parameter', async () => {
      const response = await oauth.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { ...FORM, authorization: basic(service.client.clientId, service.secret) },
        payload: 'grant_type=client_credentials&scope=read%3Aposts&scope=write%3Aposts',
      });
      expectError(response, 400, 'invalid_request', 'The scope parameter is repeated.');
    });

    it('a public client asking for client_credentials', async () => {
      const spa = await createClient(t.db, { type: 'public', secretHash: null, grantTypes: ['authorization_code', 'client_credentials'] });
      const response = await requestToken({ grant_type: 'client_credentials', client_id: spa.client.clientId });
      expectError(response, 400, 'unauthorized_client', 'The client is not allowed to use the client_credentials grant.');
    });

    it('a confidential client not registered for client_credentials', async () => {
      const web = await createClient(t.db, { grantTypes: ['authorization_code'] });
      const response = await requestToken({ grant_type: 'client_credentials' }, { authorization: basic(web.client.clientId, web.secret) });
      expectError(response, 400, 'unauthorized_client', 'The client is not allowed to use the client_credentials grant.');
    });
  });

  describe('records its decision in the audit log', () => {
    /** What the endpoint sent to the audit log while answering one request. */
    async function decisionsOf(send: () => ReturnType<typeof requestToken>) {
      const before = oauth.decisions.length;
      const response = await send();
      return { response, decisions: oauth.decisions.slice(before) };
    }
    const oauthDecision = { requestId: expect.any(String), interface: 'oauth', operation: 'token', sourceAddress: '127.0.0.1' };

    it('when it issues a token: the client, whom the token speaks for, and the token\'s jti', async () => {
      const { response, decisions } = await decisionsOf(() => requestToken({ grant_type: 'client_credentials' }, asService()));
      expect(response.statusCode).toBe(200);
      const { jti } = await oauth.tokens.verifyAccessToken(response.json().access_token);
      expect(decisions).toEqual([
        {
          ...oauthDecision,
          subject: service.client.clientId,
          clientId: service.client.clientId,
          resourceType: 'token',
          resourceId: jti,
          decision: 'allow',
          reason: 'granted',
          scopes: 'read:posts write:posts',
        },
      ]);
      expect(JSON.stringify(decisions)).not.toContain(response.json().access_token);
    });

    it('when client authentication fails, naming the client tried and never the secret', async () => {
      const { response, decisions } = await decisionsOf(() =>
        requestToken({ grant_type: 'client_credentials' }, { authorization: basic(service.client.clientId, 'wrong-secret-value') }),
      );
      expect(response.statusCode).toBe(401);
      const denied = { ...oauthDecision, subject: null, resourceType: null, resourceId: null, decision: 'deny', reason: 'authentication' };
      expect(decisions).toEqual([{ ...denied, clientId: service.client.clientId }]);
      expect(JSON.stringify(decisions)).not.toContain('wrong-secret-value');

      const posted = await decisionsOf(() =>
        requestToken({ grant_type: 'client_credentials', client_id: 'nobody', client_secret: 'guess-0123456789' }),
      );
      // An unregistered client_id may be a secret sent in the wrong field: it is not recorded.
      expect(posted.decisions).toEqual([{ ...denied, clientId: null }]);
      expect(JSON.stringify(posted.decisions)).not.toContain('guess-0123456789');
    });

    it('with no client id when the one presented names no client, or none could be read', async () => {
      const odd = await decisionsOf(() => requestToken({ grant_type: 'client_credentials' }, { authorization: basic('<script>', 'x') }));
      expect(odd.response.statusCode).toBe(401);
      expect(odd.decisions).toEqual([expect.objectContaining({ clientId: null, decision: 'deny', reason: 'authentication' })]);
      const swapped = await decisionsOf(() => requestToken({ grant_type: 'client_credentials' }, { authorization: basic(service.secret, service.client.clientId) }));
      expect(swapped.response.statusCode).toBe(401);
      expect(JSON.stringify(swapped.decisions)).not.toContain(service.secret);
      expect(swapped.decisions).toEqual([expect.objectContaining({ clientId: null })]);
      const malformed = await decisionsOf(() => requestToken({ grant_type: 'client_credentials' }, { authorization: 'Basic not-base64!' }));
      expect(malformed.decisions).toEqual([expect.objectContaining({ clientId: null, decision: 'deny', reason: 'authentication' })]);
    });

    it('when the grant refuses the scope or the grant type', async () => {
      const scope = await decisionsOf(() => requestToken({ grant_type: 'client_credentials', scope: 'read:users' }, asService()));
      expect(scope.response.statusCode).toBe(400);
      const refused = { ...oauthDecision, subject: null, resourceType: null, resourceId: null, decision: 'deny' };
      expect(scope.decisions).toEqual([{ ...refused, clientId: service.client.clientId, reason: 'scope' }]);

      const web = await createClient(t.db, { grantTypes: ['authorization_code'] });
      const grant = await decisionsOf(() =>
        requestToken({ grant_type: 'client_credentials' }, { authorization: basic(web.client.clientId, web.secret) }),
      );
      expect(grant.response.statusCode).toBe(400);
      expect(grant.decisions).toEqual([{ ...refused, clientId: web.client.clientId, reason: 'grant' }]);
    });

    it('but not for a request malformed before any decision, nor for a failure of its own', async () => {
      for (const send of [
        () => requestToken({}, asService()),
        () => requestToken({ grant_type: 'urn:example:magic' }, asService()),
        () => requestToken({ grant_type: 'client_credentials', client_id: service.client.clientId, client_secret: service.secret }, asService()),
      ]) {
        const { response, decisions } = await decisionsOf(send);
        expect(response.statusCode).toBe(400);
        expect(decisions).toEqual([]);
      }
      // The registration is read again (held registrations are dropped as an unreadable feed drops them).
      oauth.clients.clear();
      vi.spyOn(t.db.kysely, 'selectFrom').mockImplementation(() => {
        throw Object.assign(new Error('connect ECONNREFUSED 10.1.2.3:5432'), { code: 'ECONNREFUSED' });
      });
      const outage = await decisionsOf(() => requestToken({ grant_type: 'client_credentials' }, asService()));
      expect(outage.response.statusCode).toBe(503);
      expect(outage.decisions).toEqual([]);
    });
  });

  it('answers 503 temporarily_unavailable when the database cannot be reached, without internals', async () => {
    oauth.clients.clear();
    vi.spyOn(t.db.kysely, 'selectFrom').mockImplementation(() => {
      throw Object.assign(new Error('connect ECONNREFUSED 10.1.2.3:5432'), { code: 'ECONNREFUSED' });
    });
    const response = await requestToken({ grant_type: 'client_credentials' }, asService());
    expectError(response, 503, 'temporarily_unavailable', 'The service is temporarily unavailable; try again later.');
  });

  it('answers 500 server_error for an internal failure, without internals', async () => {
    oauth.clients.clear();
    vi.spyOn(t.db.kysely, 'selectFrom').mockImplementation(() => {
      throw new Error('relation "clients" does not exist');
    });
    const response = await requestToken({ grant_type: 'client_credentials' }, asService());
    expectError(response, 500, 'server_error', 'An internal error occurred.');
  });

  describe('when the commit its token row is in fails', () => {
    // A trigger refuses the rows of one client, as a full disk or a lost connection would refuse a commit.
    async function refuseRowsOf(clientId: string): Promise<void> {
      if (kind === 'sqlite') {
        await sql`create trigger refuse_rows before insert on access_tokens when new.client_id = ${sql.lit(clientId)}
          begin select raise(abort, 'refused by the test'); end`.execute(t.db.kysely);
      } else {
        await sql`create function refuse_row() returns trigger language plpgsql as $$ begin raise exception 'refused by the test'; end $$`.execute(t.db.kysely);
        await sql`create trigger refuse_rows before insert on access_tokens for each row
          when (new.client_id = ${sql.lit(clientId)}) execute function refuse_row()`.execute(t.db.kysely);
      }
    }
    async function allowRowsAgain(): Promise<void> {
      if (kind === 'sqlite') await sql`drop trigger refuse_rows`.execute(t.db.kysely);
      else await sql`drop trigger refuse_rows on access_tokens; drop function refuse_row()`.execute(t.db.kysely);
    }
    const rowsOf = (clientId: string) => t.db.kysely.selectFrom('accessTokens').select('jti').where('clientId', '=', clientId).execute();

    it('answers 503 temporarily_unavailable, issues no token, records no grant, and the next request succeeds', async () => {
      const doomed = await createClient(t.db, { accessTokenFormat: 'opaque' });
      const headers = { authorization: basic(doomed.client.clientId, doomed.secret) };
      await refuseRowsOf(doomed.client.clientId);
      try {
        const recorded = oauth.decisions.length;
        const response = await requestToken({ grant_type: 'client_credentials' }, headers);
        expectError(response, 503, 'temporarily_unavailable', 'The service is temporarily unavailable; try again later.');
        expect(oauth.decisions.slice(recorded)).toEqual([]);
        expect(await rowsOf(doomed.client.clientId)).toEqual([]);
      } finally {
        await allowRowsAgain();
      }
      const retried = await requestToken({ grant_type: 'client_credentials' }, headers);
      expect(retried.statusCode).toBe(200);
      expect(await rowsOf(doomed.client.clientId)).toEqual([{ jti: expect.any(String) }]);
    });

    it('answers 503 for a JWT, which has no row, when its client registration cannot be read to confirm it', async () => {
      const held = await createClient(t.db);
      const headers = { authorization: basic(held.client.clientId, held.secret) };
      await oauth.invalidations.poll(); // the registration's creation is followed now, not after it is held
      // Held in memory from here on: authentication needs no read, the registration's confirmation does.
      expect((await requestToken({ grant_type: 'client_credentials' }, headers)).statusCode).toBe(200);
      await sql`alter table clients rename to clients_away`.execute(t.db.kysely);
      try {
        const recorded = oauth.decisions.length;
        const response = await requestToken({ grant_type: 'client_credentials' }, headers);
        expectError(response, 503, 'temporarily_unavailable', 'The service is temporarily unavailable; try again later.');
        expect(oauth.decisions.slice(recorded)).toEqual([]);
      } finally {
        await sql`alter table clients_away rename to clients`.execute(t.db.kysely);
      }
      expect((await requestToken({ grant_type: 'client_credentials' }, headers)).statusCode).toBe(200);
    });
  });

  it('keeps the form parser inside the OAuth scope: the JSON API beside it still takes JSON only', async () => {
    const jsonHeaders = { 'content-type': 'application/json' };
    const json = await oauth.app.inject({ method: 'POST', url: '/v1/echo', headers: jsonHeaders, payload: '{"a":1}' });
    expect(json.json()).toEqual({ a: 1 });
    const formPost = await oauth.app.inject({ method: 'POST', url: '/v1/echo', headers: FORM, payload: 'a=1' });
    expect(formPost.statusCode).toBe(415);
  });
});
