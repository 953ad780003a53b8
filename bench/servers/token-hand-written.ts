/**
 * What-if: the client-credentials token endpoint written by hand with the changes the stage timings point
 * to, on the same app, database and audit log as servers/token-endpoint.ts — to measure what they reach
 * together before `src/` is changed. Kept from the real endpoint: the per-address rate limit, the same form
 * checks, SHA-256 of the secret compared in constant time, scope selection (grantClientCredentials), a
 * durable `access_tokens` row for every token, committed before the token is sent, the audit event, the
 * same response headers. Changed:
 * - the client registration is read once and kept in memory (the real change would drop it on the
 *   invalidation feed's `client` events);
 * - the JWT is signed with node:crypto directly (the key from the key store, the header encoded once);
 * - the rows of all requests that reach the insert in one event-loop turn are committed together through a
 *   prepared statement, and each request is answered once that commit is done.
 * Each change can be reverted on its own (`--sign-with-jose`, `--client-from-database`,
 * `--row-per-request`: the real endpoint's way), so that what each one saves under load is measured too
 * (bench/token-what-if.ts); `--no-jwt-row` goes one step further and stores nothing for a JWT (revocation
 * would then be kept by jti). No refresh grant. Not a server to run: a measurement.
 */
import Fastify from 'fastify';
import { KeyObject, randomUUID, sign } from 'node:crypto';
import { foreignCharset, mediaTypeParameters, UTF8 } from '../../src/http/body-encoding.js';
import { RateLimiter, rateLimitHeaders } from '../../src/limits/rate-limit.js';
import { grantClientCredentials } from '../../src/oauth/grants/client-credentials.js';
import { digestSecret, generateSecret, secretMatches } from '../../src/oauth/secrets.js';
import { insertAccessToken } from '../../src/oauth/tokens/access-token-records.js';
import { signJwtAccessToken } from '../../src/oauth/tokens/jwt-access-token.js';
import { findClientByClientId, type ClientWithSecret } from '../../src/storage/clients.js';
import { newId } from '../../src/storage/ids.js';
import { buildTokenBenchApp } from './token-app.js';
import { JWT_CLIENT, OPAQUE_CLIENT } from './token-clients.js';

const signWithJose = process.argv.includes('--sign-with-jose');
const clientFromDatabase = process.argv.includes('--client-from-database');
const rowPerRequest = process.argv.includes('--row-per-request');
const noJwtRow = process.argv.includes('--no-jwt-row');

const bench = await buildTokenBenchApp();
const { app, config } = bench;
const sqlite = app.db.sqlite!;
const limiter = new RateLimiter(config.rateLimit);
const clients = new Map<string, ClientWithSecret>();
for (const id of [JWT_CLIENT, OPAQUE_CLIENT]) clients.set(id, (await findClientByClientId(app.db.kysely, id))!);
const key = await app.keys.signingKey();
const privateKey = KeyObject.from(key.privateKey);
const header = Buffer.from(JSON.stringify({ alg: 'ES256', typ: 'at+jwt', kid: key.kid })).toString('base64url');

const insertRow = sqlite.prepare(
  `insert into access_tokens (jti, token_hash, format, client_id, client_registration_id, subject, subject_type, scopes, grant_type, issued_at, expires_at, revoked_at, grant_id)
   values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, null, null)`,
);
type Row = unknown[];
let pending: { row: Row; done: (error?: Error) => void }[] = [];
/** Commits every row queued in this turn in one transaction, then answers their requests. */
function commitPending(): void {
  // A Kysely transaction open on the shared connection (src/storage/sqlite-handle.ts) is waited out.
  if (sqlite.inTransaction) return void setImmediate(commitPending);
  const batch = pending;
  pending = [];
  try {
    sqlite.immediateTransaction(() => {
      for (const { row } of batch) insertRow.run(row);
    });
    for (const { done } of batch) done();
  } catch (error) {
    for (const { done } of batch) done(error as Error);
  }
}
function storeRow(row: Row): Promise<void> {
  if (pending.length === 0) setImmediate(commitPending);
  return new Promise((resolve, reject) => pending.push({ row, done: (error) => (error ? reject(error) : resolve()) }));
}

class Refusal extends Error {
  constructor(readonly status: number, readonly code: string) {
    super(code);
  }
}

async function authenticate(authorization: string | undefined): Promise<ClientWithSecret> {
  const match = /^Basic +([A-Za-z0-9+/]+={0,2}) *$/i.exec(authorization ?? '');
  if (!match) throw new Refusal(401, 'invalid_client');
  const decoded = UTF8.decode(Buffer.from(match[1]!, 'base64'));
  const colon = decoded.indexOf(':');
  const clientId = decodeURIComponent(decoded.slice(0, colon));
  const client = clientFromDatabase ? await findClientByClientId(app.db.kysely, clientId) : clients.get(clientId);
  const secret = decodeURIComponent(decoded.slice(colon + 1));
  if (!client || client.secretHash === null || !secretMatches(secret, client.secretHash)) throw new Refusal(401, 'invalid_client');
  return client;
}

const fastify = Fastify({ logger: { level: 'warn' }, genReqId: () => randomUUID() });
fastify.removeAllContentTypeParsers();
fastify.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, (request, body, done) => {
  const contentType = request.headers['content-type'];
  if (contentType !== undefined && foreignCharset(mediaTypeParameters(contentType)) !== null) return done(new Refusal(415, 'invalid_request'));
  const form = new URLSearchParams(UTF8.decode(body as Buffer));
  const params: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [name, value] of form) {
    if (name in params || name.includes('\uFFFD') || value.includes('\uFFFD')) return done(new Refusal(400, 'invalid_request'));
    if (value !== '') params[name] = value;
  }
  done(null, params);
});
fastify.addHook('onRequest', async (request, reply) => {
  reply.header('x-request-id', request.id).header('x-content-type-options', 'nosniff');
  const limit = await limiter.oauth.consume(request.ip);
  reply.headers(rateLimitHeaders(limit));
  if (!limit.allowed) throw new Refusal(429, 'temporarily_unavailable');
});
fastify.setErrorHandler((error, _request, reply) => {
  const status = error instanceof Refusal ? error.status : 500;
  void reply.status(status).header('cache-control', 'no-store').send({ error: error instanceof Refusal ? error.code : 'server_error' });
});
fastify.post('/oauth/token', async (request, reply) => {
  const params = request.body as Record<string, string>;
  if (params.grant_type !== 'client_credentials') throw new Refusal(400, 'unsupported_grant_type');
  const client = await authenticate(request.headers.authorization);
  const { subject, scopes } = grantClientCredentials(client, params);
  const scope = scopes.join(' ');
  const iat = Math.floor(Date.now() / 1000);
  const exp = iat + client.accessTokenTtl;
  const jti = newId();
  let accessToken: string;
  let tokenHash: string | null = null;
  if (client.accessTokenFormat === 'jwt') {
    const claims = { iss: config.issuer, aud: config.issuer, sub: subject, client_id: client.clientId, jti, scope, iat, exp };
    if (signWithJose) accessToken = await signJwtAccessToken(claims, key);
    else {
      const input = `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
      accessToken = `${input}.${sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
    }
  } else {
    accessToken = generateSecret();
    tokenHash = digestSecret(accessToken);
  }
  const issuedAt = new Date(iat * 1000).toISOString();
  const expiresAt = new Date(exp * 1000).toISOString();
  const grantType = 'client_credentials';
  if (noJwtRow && client.accessTokenFormat === 'jwt') {
    // Nothing stored: the audit event below still records the jti.
  } else if (rowPerRequest) {
    await insertAccessToken(app.db.kysely, {
      jti, tokenHash, format: client.accessTokenFormat, clientId: client.clientId, clientRegistrationId: client.id, subject, subjectType: 'client', scopes: scope,
      grantType, issuedAt, expiresAt, revokedAt: null, grantId: null,
    });
  } else {
    await storeRow([jti, tokenHash, client.accessTokenFormat, client.clientId, client.id, subject, 'client', scope, grantType, issuedAt, expiresAt]);
  }
  app.audit.record({ requestId: request.id, interface: 'oauth', operation: 'token', sourceAddress: request.ip, subject, clientId: client.clientId, resourceType: 'token', resourceId: jti, decision: 'allow', reason: 'granted' });
  return reply.headers({ 'cache-control': 'no-store', pragma: 'no-cache' }).send({ access_token: accessToken, token_type: 'Bearer', expires_in: exp - iat, scope });
});

await fastify.listen({ host: '127.0.0.1', port: 0 });
const { port } = fastify.server.address() as { port: number };
process.stdout.write(`${JSON.stringify({ bench: { port, pid: process.pid } })}\n`);
process.on('SIGTERM', () => {
  void fastify.close().then(async () => {
    await bench.close();
    process.exit(0);
  });
});
