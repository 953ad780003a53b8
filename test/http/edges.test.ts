import fs from 'node:fs';
import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { refuseAuditWrites } from '../helpers/audit.js';

// The edges of HTTP itself, on a real socket: what Node refuses before Fastify sees a request (slow bodies,
// oversized headers, conflicting framing, too many connections) answers in the API's error shape too.

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Milliseconds from the first byte sent to the connection's end. */
  elapsedMs: number;
}

function parse(raw: string, elapsedMs: number): RawResponse {
  const split = raw.indexOf('\r\n\r\n');
  const [statusLine, ...lines] = raw.slice(0, split).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine!.split(' ')[1]), headers, body: raw.slice(split + 4), elapsedMs };
}

/** Opens a connection, writes `chunks` (then waits, with the connection open), reads until the server closes it. */
function exchange(port: number, chunks: (string | Buffer)[], timeoutMs = 8000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const started = Date.now();
    let raw = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms; got ${JSON.stringify(raw)}`));
    }, timeoutMs);
    socket.on('data', (data) => (raw += data.toString('utf8')));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      if (raw === '') reject(new Error('the connection closed without an answer'));
      else resolve(parse(raw, Date.now() - started));
    });
    socket.on('connect', () => {
      for (const chunk of chunks) socket.write(chunk);
    });
  });
}

function openIdle(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => resolve(socket));
    socket.on('error', reject);
  });
}

const JSON_TYPE = 'application/json; charset=utf-8';

describe('HTTP edges on a real socket', () => {
  let t: TestApp;
  let port: number;

  beforeAll(async () => {
    t = await startTestApp('sqlite', { REQUEST_TIMEOUT_SECONDS: '1', MAX_CONNECTIONS_PER_ADDRESS: '4' });
    await t.app.fastify.listen({ host: '127.0.0.1', port: 0 });
    port = (t.app.fastify.server.address() as net.AddressInfo).port;
  });
  afterAll(() => t?.close());

  it('answers a body that stops arriving with 408 REQUEST_TIMEOUT within the time limit, and closes', async () => {
    // Authenticated and allowed, so the server is waiting for the body when it stops coming.
    const token = await t.adminClientToken();
    const res = await exchange(port, [
      `POST /v1/posts HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"title":`,
    ]);
    expect({ status: res.status, type: res.headers['content-type'], nosniff: res.headers['x-content-type-options'], body: JSON.parse(res.body) }).toEqual({
      status: 408,
      type: JSON_TYPE,
      nosniff: 'nosniff',
      body: { error: { code: 'REQUEST_TIMEOUT', message: 'The request did not arrive whole in time.' } },
    });
    expect(res.headers.connection).toBe('close');
    // REQUEST_TIMEOUT_SECONDS=1, checked every second: never the 60 s and more of Node's defaults.
    expect(res.elapsedMs).toBeLessThan(4000);
  });

  it('refuses a request whose body has not arrived with one answer and closes, never a 408 after it', async () => {
    const res = await exchange(port, ['POST /v1/posts HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"ti']);
    // One response: a second one (the 408 once REQUEST_TIMEOUT_SECONDS passed) would follow this body.
    expect({ status: res.status, connection: res.headers.connection, body: JSON.parse(res.body) }).toEqual({
      status: 401,
      connection: 'close',
      body: { error: { code: 'UNAUTHENTICATED', message: expect.any(String) } },
    });
    expect(res.elapsedMs).toBeLessThan(1000);
  });

  it('answers headers that never finish with 408 as well', async () => {
    const res = await exchange(port, ['GET /v1/rest HTTP/1.1\r\nHost: localhost\r\nX-Slow: a']);
    expect(res.status).toBe(408);
    expect(JSON.parse(res.body).error.code).toBe('REQUEST_TIMEOUT');
  });

  it('answers oversized headers with 431 HEADERS_TOO_LARGE in the API shape', async () => {
    const res = await exchange(port, [`GET /v1/rest HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`]);
    expect({ status: res.status, type: res.headers['content-type'], nosniff: res.headers['x-content-type-options'], body: JSON.parse(res.body) }).toEqual({
      status: 431,
      type: JSON_TYPE,
      nosniff: 'nosniff',
      body: { error: { code: 'HEADERS_TOO_LARGE', message: 'The request headers are too large.' } },
    });
  });

  it('refuses Content-Length together with Transfer-Encoding (request smuggling) with 400 in the API shape', async () => {
    const res = await exchange(port, [
      'POST /v1/posts HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    ]);
    expect({ status: res.status, type: res.headers['content-type'], nosniff: res.headers['x-content-type-options'], body: JSON.parse(res.body) }).toEqual({
      status: 400,
      type: JSON_TYPE,
      nosniff: 'nosniff',
      body: { error: { code: 'VALIDATION_FAILED', message: 'The request is not valid HTTP/1.1.' } },
    });
  });

  it('answers an HTTP/1.1 request without Host with 400 in the API shape, and ignores an unknown expectation', async () => {
    const noHost = await exchange(port, ['GET /v1/rest HTTP/1.1\r\nConnection: close\r\n\r\n']);
    expect({ status: noHost.status, type: noHost.headers['content-type'], nosniff: noHost.headers['x-content-type-options'], body: JSON.parse(noHost.body) }).toEqual({
      status: 400,
      type: JSON_TYPE,
      nosniff: 'nosniff',
      body: { error: { code: 'VALIDATION_FAILED', message: 'An HTTP/1.1 request needs exactly one Host header.' } },
    });
    const expect417 = await exchange(port, ['GET /v1/rest HTTP/1.1\r\nHost: localhost\r\nExpect: foo\r\nConnection: close\r\n\r\n']);
    expect({ status: expect417.status, type: expect417.headers['content-type'], nosniff: expect417.headers['x-content-type-options'] }).toEqual({
      status: 200,
      type: 'application/json; charset=utf-8',
      nosniff: 'nosniff',
    });
  });

  it('answers two Host headers with 400 and CONNECT with 405, in the API shape', async () => {
    const twoHosts = await exchange(port, ['GET /v1/rest HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\nConnection: close\r\n\r\n']);
    expect({ status: twoHosts.status, nosniff: twoHosts.headers['x-content-type-options'], body: JSON.parse(twoHosts.body) }).toEqual({
      status: 400,
      nosniff: 'nosniff',
      body: { error: { code: 'VALIDATION_FAILED', message: 'An HTTP/1.1 request needs exactly one Host header.' } },
    });
    const connect = await exchange(port, ['CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n']);
    expect({ status: connect.status, nosniff: connect.headers['x-content-type-options'], body: JSON.parse(connect.body) }).toEqual({
      status: 405,
      nosniff: 'nosniff',
      body: { error: { code: 'METHOD_NOT_ALLOWED', message: 'CONNECT is not served here: this is not a proxy.' } },
    });
  });

  it('caps open connections per address: the one over the cap gets 429 and is closed; a freed slot is usable again', async () => {
    const held = await Promise.all([openIdle(port), openIdle(port), openIdle(port), openIdle(port)]);
    try {
      const refused = await exchange(port, ['GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n']);
      expect({ status: refused.status, retryAfter: refused.headers['retry-after'], body: JSON.parse(refused.body) }).toEqual({
        status: 429,
        retryAfter: '1',
        body: { error: { code: 'RATE_LIMITED', message: 'Too many open connections from this address.' } },
      });
      const closed = new Promise((resolve) => held[0]!.once('close', resolve));
      held[0]!.destroy();
      await closed;
      await new Promise((resolve) => setTimeout(resolve, 50));
      const served = await exchange(port, ['GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n']);
      expect(served.status).toBe(200);
    } finally {
      for (const socket of held) socket.destroy();
    }
  });
});

describe('a request that arrives while the server shuts down', () => {
  it('is refused with 503 UNAVAILABLE in the API shape, and the one in flight completes', async () => {
    const t = await startTestApp('sqlite');
    try {
      await t.app.fastify.listen({ host: '127.0.0.1', port: 0 });
      const port = (t.app.fastify.server.address() as net.AddressInfo).port;
      const token = await t.adminClientToken();
      const body = JSON.stringify({ title: 'During shutdown', body: 'x', status: 'draft' });
      const socket = net.connect(port, '127.0.0.1');
      let raw = '';
      socket.on('data', (data) => (raw += data.toString('utf8')));
      const ended = new Promise((resolve) => socket.on('close', resolve));
      await new Promise((resolve) => socket.on('connect', resolve));
      socket.write(`POST /v1/posts HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const closed = t.app.close();
      await new Promise((resolve) => setTimeout(resolve, 100));
      socket.write(`${body.slice(5)}GET /v1/rest HTTP/1.1\r\nHost: localhost\r\n\r\n`);
      await closed;
      await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 3000))]);
      socket.destroy();
      const responses = raw.split(/(?=HTTP\/1\.1 )/).map((part) => parse(part, 0));
      expect(responses.map((r) => r.status)).toEqual([201, 503]);
      expect({ nosniff: responses[1]!.headers['x-content-type-options'], retryAfter: responses[1]!.headers['retry-after'], body: JSON.parse(responses[1]!.body) }).toEqual({
        nosniff: 'nosniff',
        retryAfter: '1',
        body: { error: { code: 'UNAVAILABLE', message: 'The server is shutting down; retry.' } },
      });
    } finally {
      await t.database.drop();
      fs.rmSync(t.dataDir, { recursive: true, force: true });
    }
  });
});

describe('HTTP edges answered by the application', () => {
  let t: TestApp;
  let token: string;

  beforeAll(async () => {
    t = await startTestApp('sqlite', { ISSUER: 'https://api.example.com' });
    token = await t.adminClientToken();
  });
  afterAll(() => t?.close());

  const post = (contentType: string, payload: string | Buffer) =>
    t.app.fastify.inject({ method: 'POST', url: '/v1/posts', headers: { authorization: `Bearer ${token}`, 'content-type': contentType }, payload });

  async function postCount(): Promise<number> {
    const row = await t.database.db.kysely.selectFrom('posts').select((eb) => eb.fn.countAll<string | number>().as('n')).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  it('answers a wrong method on the JSON OAuth endpoints with 405, Allow and an RFC 6749 error body, not stored', async () => {
    const cases = [
      ['GET', '/oauth/token', 'POST', 'Use POST.'],
      ['PUT', '/oauth/token?x=1', 'POST', 'Use POST.'],
      ['GET', '/oauth/revoke', 'POST', 'Use POST.'],
      ['DELETE', '/oauth/introspect', 'POST', 'Use POST.'],
      ['GET', '/oauth/device_authorization', 'POST', 'Use POST.'],
      ['DELETE', '/oauth/userinfo', 'GET, POST, HEAD', 'Use GET or POST.'],
    ] as const;
    for (const [method, url, allow, description] of cases) {
      const res = await t.app.fastify.inject({ method, url });
      expect({ method, url, status: res.statusCode, allow: res.headers.allow, type: res.headers['content-type'], cache: res.headers['cache-control'], pragma: res.headers.pragma, body: res.json() }).toEqual({
        method,
        url,
        status: 405,
        allow,
        type: JSON_TYPE,
        cache: 'no-store',
        pragma: 'no-cache',
        body: { error: 'invalid_request', error_description: description },
      });
    }
  });

  it('keeps the API shape for a wrong method elsewhere, the JWKS included, and 404 for an unknown OAuth path', async () => {
    const jwks = await t.app.fastify.inject({ method: 'DELETE', url: '/.well-known/jwks.json' });
    expect({ status: jwks.statusCode, allow: jwks.headers.allow, body: jwks.json() }).toEqual({
      status: 405,
      allow: 'GET, HEAD',
      body: { error: { code: 'METHOD_NOT_ALLOWED', message: 'DELETE is not allowed here; use GET, HEAD.' } },
    });
    const posts = await t.app.fastify.inject({ method: 'PATCH', url: '/v1/posts' });
    expect({ status: posts.statusCode, body: posts.json() }).toEqual({ status: 405, body: { error: { code: 'METHOD_NOT_ALLOWED', message: 'PATCH is not allowed here; use GET, HEAD, POST.' } } });
    const unknown = await t.app.fastify.inject({ method: 'GET', url: '/oauth/tokens' });
    expect({ status: unknown.statusCode, body: unknown.json() }).toEqual({ status: 404, body: { error: { code: 'NOT_FOUND', message: 'There is no such endpoint.' } } });
  });

  it('refuses a JSON body declared in another charset with 415, creating nothing', async () => {
    const res = await post('application/json; charset=iso-8859-1', JSON.stringify({ title: 'caf\u00e9', body: 'x' }));
    expect({ status: res.statusCode, body: res.json() }).toEqual({
      status: 415,
      body: { error: { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'The request body must be UTF-8 JSON; charset=iso-8859-1 is not accepted.' } },
    });
    expect(await postCount()).toBe(0);
    const twice = await post('application/json; charset=latin1; charset=utf-8', JSON.stringify({ title: 'caf\u00e9', body: 'x' }));
    expect(twice.statusCode).toBe(415);
    const utf8 = await post('application/json; charset="UTF-8"', JSON.stringify({ title: 'caf\u00e9', body: 'x' }));
    expect(utf8.statusCode, utf8.body).toBe(201);
  });

  it('refuses a body in the vendor media type with an unknown version with 415, as Accept gets 406', async () => {
    const before = await postCount();
    const res = await post('application/vnd.portcullis+json; version=2', JSON.stringify({ title: 't', body: 'x' }));
    expect({ status: res.statusCode, body: res.json() }).toEqual({
      status: 415,
      body: { error: { code: 'UNSUPPORTED_MEDIA_TYPE', message: 'API version 2 is not available for request bodies; supported: 1.' } },
    });
    expect(await postCount()).toBe(before);
    expect((await post('application/vnd.portcullis+json; version=1', JSON.stringify({ title: 't', body: 'x' }))).statusCode).toBe(201);
  });

  it('refuses a JSON body that is not valid UTF-8 with 400 instead of storing replacement characters', async () => {
    const before = await postCount();
    const bytes = Buffer.concat([Buffer.from('{"title":"caf'), Buffer.from([0xe9]), Buffer.from('","body":"x"}')]);
    const res = await post('application/json', bytes);
    expect({ status: res.statusCode, body: res.json() }).toEqual({
      status: 400,
      body: { error: { code: 'VALIDATION_FAILED', message: 'The body is not valid UTF-8.' } },
    });
    expect(await postCount()).toBe(before);
  });

  it('refuses a token request form in another charset (415) or not UTF-8 (400), before any credential is checked', async () => {
    const form = (contentType: string, payload: string | Buffer) =>
      t.app.fastify.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': contentType }, payload });
    const latin1 = await form('application/x-www-form-urlencoded; charset=iso-8859-1', 'grant_type=client_credentials&client_id=portcullis-admin&client_secret=x');
    expect({ status: latin1.statusCode, type: latin1.headers['content-type'], body: latin1.json() }).toEqual({
      status: 415,
      type: JSON_TYPE,
      body: { error: 'invalid_request', error_description: 'The form must be UTF-8; charset=iso-8859-1 is not accepted.' },
    });
    const raw = await form('application/x-www-form-urlencoded', Buffer.concat([Buffer.from('grant_type=client_credentials&client_id=portcullis-admin&client_secret='), Buffer.from([0xff])]));
    expect({ status: raw.statusCode, body: raw.json() }).toEqual({ status: 400, body: { error: 'invalid_request', error_description: 'The form is not valid UTF-8.' } });
    const encoded = await form('application/x-www-form-urlencoded', 'grant_type=client_credentials&client_id=portcullis-admin&client_secret=%FF');
    expect({ status: encoded.statusCode, body: encoded.json() }).toEqual({
      status: 400,
      body: { error: 'invalid_request', error_description: 'The form is not valid UTF-8 once percent-decoded.' },
    });
    const utf8 = await form('application/x-www-form-urlencoded; charset=UTF-8', 'grant_type=client_credentials&client_id=portcullis-admin&client_secret=caf%C3%A9');
    expect(utf8.statusCode).toBe(401);
  });

  it('sends nosniff and, with an https ISSUER, HSTS on every answer: API, errors, OAuth, health', async () => {
    const answers = await Promise.all([
      t.app.fastify.inject({ url: '/v1/rest' }),
      t.app.fastify.inject({ url: '/v1/nothing' }),
      t.app.fastify.inject({ url: '/v1/posts', headers: { authorization: 'Bearer forged.x.y' } }),
      t.app.fastify.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'grant_type=password' }),
      t.app.fastify.inject({ url: '/.well-known/oauth-authorization-server' }),
      t.app.fastify.inject({ url: '/healthz' }),
      t.app.fastify.inject({ url: '/v1/%E0%A4%A' }),
    ]);
    for (const res of answers) {
      expect({ status: res.statusCode, nosniff: res.headers['x-content-type-options'], hsts: res.headers['strict-transport-security'] }).toEqual({
        status: res.statusCode,
        nosniff: 'nosniff',
        hsts: 'max-age=31536000; includeSubDomains',
      });
    }
  });

  it('sends no HSTS when the issuer is plain http (a development server)', async () => {
    const local = await startTestApp('sqlite');
    try {
      const res = await local.app.fastify.inject({ url: '/v1/rest' });
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['strict-transport-security']).toBeUndefined();
    } finally {
      await local.close();
    }
  });
});

// A refusal decided in an onRequest hook (an address past its OAuth budget, a full audit log) comes before the
// body is read, on every interface: one answer, and the connection ends with it.
describe('refusals before the body, on every interface', () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });
  async function listening(env: Record<string, string>): Promise<number> {
    t = await startTestApp('sqlite', { REQUEST_TIMEOUT_SECONDS: '1', ...env });
    await t.app.fastify.listen({ host: '127.0.0.1', port: 0 });
    return (t.app.fastify.server.address() as net.AddressInfo).port;
  }
  const partialPost = (path: string, type: string, start: string) => `POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: ${type}\r\nContent-Length: 100\r\n\r\n${start}`;
  const FORM_TYPE = 'application/x-www-form-urlencoded';

  it('an OAuth endpoint past the address budget: 429, one answer, closed', async () => {
    const port = await listening({ RATE_LIMIT_ANONYMOUS_MAX: '1' });
    const spent = await t!.app.fastify.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': FORM_TYPE }, payload: 'grant_type=password' });
    expect(spent.statusCode).toBe(400);
    const res = await exchange(port, [partialPost('/oauth/token', FORM_TYPE, 'grant_type=cli')]);
    expect({ status: res.status, connection: res.headers.connection, body: JSON.parse(res.body) }).toEqual({
      status: 429,
      connection: 'close',
      body: { error: 'temporarily_unavailable', error_description: expect.stringMatching(/^Too many requests; retry in \d+ s\.$/) },
    });
    expect(res.elapsedMs).toBeLessThan(1000);
  });

  it('GraphQL and OAuth while the audit log is full: 503, one answer, closed', async () => {
    const port = await listening({ AUDIT_MAX_PENDING: '10' });
    const token = await t!.adminClientToken();
    await t!.app.audit.flush();
    await refuseAuditWrites(t!.database.db.kysely, 'sqlite');
    for (let i = 0; i < 30 && !t!.app.audit.full; i++) await t!.request({ url: '/v1/authorization', token });
    expect(t!.app.audit.full).toBe(true);
    const graphql = await exchange(port, [partialPost('/graphql', 'application/json', '{"query":')]);
    expect({ status: graphql.status, connection: graphql.headers.connection, body: JSON.parse(graphql.body) }).toEqual({
      status: 503,
      connection: 'close',
      body: { errors: [{ message: 'The audit log cannot be written at the moment; retry.', extensions: { code: 'UNAVAILABLE' } }] },
    });
    expect(graphql.elapsedMs).toBeLessThan(1000);
    const oauth = await exchange(port, [partialPost('/oauth/token', FORM_TYPE, 'grant_type=cli')]);
    expect({ status: oauth.status, connection: oauth.headers.connection, body: JSON.parse(oauth.body) }).toEqual({
      status: 503,
      connection: 'close',
      body: { error: 'temporarily_unavailable', error_description: 'The audit log cannot be written at the moment; retry.' },
    });
    expect(oauth.elapsedMs).toBeLessThan(1000);
  });
});
