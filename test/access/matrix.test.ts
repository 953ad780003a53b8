/**
 * The authorization matrix, derived from the generated route and policy tables rather than written per
 * operation: every operation x every role (and anonymous) x {required scopes present, absent} x {own
 * resource, someone else's draft/published, missing}. The expected status comes from a small reference
 * reading of the policy table (matrix-support.ts); adding an operation to the contract adds its rows.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routes } from '../../generated/routes.js';
import type { RouteDefinition } from '../../src/rest/route-definition.js';
import { ALL_API_SCOPES, startTestApp, type TestApp, type TestUser } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { arrange, exampleBody, expectedOutcome, ROLES, targetsFor, type Row } from './matrix-support.js';

describe.each(DATABASE_KINDS)('authorization matrix on %s', (kind) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(kind, { RATE_LIMIT_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000' });
  });
  afterAll(async () => {
    await t?.close();
  });

  function urlFor(route: RouteDefinition, me: TestUser, id: string | undefined): string {
    return route.path.replace(/\{([^}]+)\}/g, (_m, name: string) => (route.access.resource?.param === name ? id! : me.id));
  }

  for (const route of routes) {
    for (const role of [...ROLES, 'anonymous']) {
      for (const scopesPresent of role === 'anonymous' ? [false] : [true, false]) {
        for (const target of targetsFor(route)) {
          const label = `${route.operationId} as ${role}${role === 'anonymous' ? '' : `, scopes ${scopesPresent ? 'present' : 'absent'}`}, target ${target}`;
          it(label, async () => {
            const me = await t.createUser(role === 'anonymous' ? 'member' : (role as never));
            const other = await t.createUser('member');
            const arranged = await arrange(t, route.access.resource?.type, target, me, other);
            const scopes = scopesPresent ? route.access.scopes : ALL_API_SCOPES.filter((s) => !route.access.scopes.includes(s));
            const token = role === 'anonymous' ? undefined : await me.token(scopes.length > 0 ? scopes : ALL_API_SCOPES);
            const body = exampleBody(route);
            const res = await t.request({ method: route.method, url: urlFor(route, me, arranged.id), token, body, headers: body && route.bodyMediaType ? { 'content-type': route.bodyMediaType } : {} });
            const caller = role === 'anonymous' ? null : { id: me.id, role };
            const expected = expectedOutcome(route, caller, scopesPresent, arranged.target, arranged.rows, body);
            expect({ status: res.statusCode, code: res.statusCode >= 400 ? res.json().error.code : undefined }, res.body).toEqual({
              status: expected.status,
              code: expected.code,
            });
          });
        }
      }
    }
  }

  // The rows above use minted tokens (TestUser.token): what the authorization code grant issues, without the
  // pages. Here each role signs in for real (authorization code + PKCE through the login page) and a sample
  // of the matrix — reads and writes, own, others' and missing resources of every type — runs with that token
  // and with a minted one: both must decide as the policy says.
  const SAMPLE = ['getAuthorization', 'listUsers', 'getUser', 'listPosts', 'createPost', 'getPost', 'replacePost', 'deletePost', 'createComment', 'getComment', 'listClients', 'getClient', 'listAuditEvents'];
  for (const role of ROLES) {
    it(`${role}: a token from a real sign-in is the minted token's twin and decides the sample alike`, async () => {
      const me = await t.createUser(role as never);
      const tokens = { 'signed in': await me.signIn(), minted: await me.token() };
      const infos = await Promise.all(Object.values(tokens).map(async (token) => (await t.request({ url: '/v1/oauth', token })).json()));
      const sameness = ({ jti: _jti, issuedAt: _issued, expiresAt: _expires, ...rest }: Row) => rest;
      expect(sameness(infos[0])).toEqual(sameness(infos[1]));
      expect(infos[0]).toMatchObject({ grantType: 'authorization_code', subject: me.id, scopes: [...ALL_API_SCOPES].sort() });
      const records = await t.database.db.kysely.selectFrom('accessTokens').select(['clientId', 'grantType', 'grantId']).where('subject', '=', me.id).execute();
      expect(records).toHaveLength(2);
      for (const record of records) expect(record).toEqual({ clientId: infos[0].clientId, grantType: 'authorization_code', grantId: expect.any(String) });

      const sample = routes.filter((r) => SAMPLE.includes(r.operationId));
      expect(sample.map((r) => r.operationId).sort()).toEqual([...SAMPLE].sort());
      const outcomes: Row[] = [];
      for (const route of sample) {
        for (const target of targetsFor(route)) {
          for (const [source, token] of Object.entries(tokens)) {
            const other = await t.createUser('member');
            const arranged = await arrange(t, route.access.resource?.type, target, me, other);
            const body = exampleBody(route);
            const res = await t.request({ method: route.method, url: urlFor(route, me, arranged.id), token, body, headers: body && route.bodyMediaType ? { 'content-type': route.bodyMediaType } : {} });
            const expected = expectedOutcome(route, { id: me.id, role }, true, arranged.target, arranged.rows, body);
            const label = `${route.operationId}, target ${target}, ${source} token`;
            outcomes.push({ label, status: res.statusCode, code: res.statusCode >= 400 ? res.json().error.code : undefined, expected: expected.status, expectedCode: expected.code });
          }
        }
      }
      expect(outcomes.filter((o) => o.status !== o.expected || o.code !== o.expectedCode)).toEqual([]);
    });
  }
});
