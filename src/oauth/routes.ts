import { addressKey } from '../limits/address-key.js';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/config.js';
import { renderOAuthError } from '../errors/oauth-renderer.js';
import { isRefusal } from '../errors/rest-renderer.js';
import type { Db } from '../storage/dialect.js';
import { registerDiscovery } from './endpoints/discovery.js';
import { registerJwks } from './endpoints/jwks.js';
import { registerRevocationEndpoint } from './endpoints/revoke.js';
import { registerTokenEndpoint, type TokenEndpointDeps } from './endpoints/token.js';
import type { KeyStore } from './keys/key-store.js';
import { OAuthError } from './oauth-error.js';
import { rateLimitHeaders, type RateLimiter } from '../limits/rate-limit.js';
import { foreignCharset, mediaTypeParameters, UTF8 } from '../http/body-encoding.js';
import type { TokenService } from './tokens/token-service.js';
import type { SignInThrottle } from '../limits/sign-in-throttle.js';
import { cookieJar } from './browser/cookies.js';
import { CsrfTokens } from './browser/csrf.js';
import { InteractionStore } from './browser/interaction-store.js';
import { KnownDevices } from './browser/known-devices.js';
import type { PageDeps } from './browser/page-deps.js';
import { SignInSessions } from './browser/sign-in-sessions.js';
import { registerAuthorizeEndpoint } from './endpoints/authorize.js';
import { registerConsentPage } from './endpoints/consent.js';
import { registerLoginPage } from './endpoints/login.js';
import { parseParams, sendPage } from './endpoints/page-reply.js';
import { registerIntrospectionEndpoint } from './endpoints/introspect.js';
import { registerDeviceAuthorizationEndpoint } from './endpoints/device-authorization.js';
import { registerDevicePages } from './endpoints/device-pages.js';
import { registerAccountPages } from './endpoints/account.js';
import { registerLogoutEndpoint } from './endpoints/logout.js';
import { registerUserinfoEndpoint } from './endpoints/userinfo.js';
import type { Principal } from '../policy/principal.js';
import { errorPage } from './pages/error-page.js';
import type { RegisteredClients } from './registered-clients.js';

export interface OAuthDeps {
  db: Db;
  /** Client registrations as the endpoints that authenticate clients read them (registered-clients.ts). */
  clients: RegisteredClients;
  /** Where the token endpoint's decisions go (see src/audit/). */
  audit: TokenEndpointDeps['audit'];
  config: Config;
  keys: KeyStore;
  tokens: TokenService;
  /** The scope catalogue, published as `scopes_supported`. */
  scopes: readonly string[];
  /** Requests per address and window (RATE_LIMIT_ANONYMOUS_MAX); absent in unit tests of the endpoints. */
  limiter?: RateLimiter;
  /** Failed passwords and user codes (login, account and device pages, password grant). */
  throttle: SignInThrottle;
  /** The contract's scope catalogue with descriptions, for the consent page. */
  scopeDescriptions: Readonly<Record<string, string>>;
  /** Drops what this process cached about a user's tokens. */
  forgetUser(userId: string): void;
  /** The API's bearer authentication (userinfo and introspection check tokens exactly as every API request). */
  authenticateBearer(authorization: string | undefined): Promise<Principal>;
  /** Tests only: where a grant or a code issuance waits for a concurrent revocation to be made (token.ts, page-deps.ts). */
  beforeGrantCommit?: TokenEndpointDeps['beforeGrantCommit'];
  duringGrantCommit?: TokenEndpointDeps['duringGrantCommit'];
  beforeCodeIssued?: PageDeps['beforeCodeIssued'];
  beforeAccountChange?: PageDeps['beforeAccountChange'];
}

/**
 * The authorization server's HTTP surface, in its own encapsulated scope: the form body parser and the
 * RFC 6749 error rendering apply here only; the REST API elsewhere keeps accepting JSON alone.
 */
export async function registerOAuth(app: FastifyInstance, deps: OAuthDeps): Promise<void> {
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    // RFC 6749 Appendix B: UTF-8 form encoding. URLSearchParams keeps repeated names visible.
    scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, (request, body, done) => {
      try {
        done(null, parseForm(request.headers['content-type'], body as Buffer));
      } catch (error) {
        done(error as Error);
      }
    });
    // A POST with no body at all (no Content-Type, no length) is an empty form: its endpoint says what is
    // missing. A body of any other type never gets this far (415 from the parser lookup).
    scope.addHook('preValidation', async (request) => {
      if (request.method === 'POST' && request.body === undefined) request.body = new URLSearchParams();
    });
    const bodyLimit = deps.config.http.bodyLimit;
    scope.setErrorHandler((error: FastifyError, request, reply) => sendOAuthError(translateFastifyError(error, bodyLimit), error, request, reply));
    if (deps.limiter) {
      const limiter = deps.limiter;
      // Per address: credential guessing and token storms are slowed before any secret is checked.
      scope.addHook('onRequest', async (request, reply) => {
        const limit = await limiter.oauth.consume(addressKey(request.ip));
        reply.headers(rateLimitHeaders(limit));
        if (!limit.allowed) {
          throw new OAuthError('temporarily_unavailable', `Too many requests; retry in ${limit.resetSeconds} s.`, 429, {
            'retry-after': String(limit.resetSeconds),
          });
        }
      });
    }
    registerTokenEndpoint(scope, deps);
    registerRevocationEndpoint(scope, deps);
    registerIntrospectionEndpoint(scope, deps);
    registerDeviceAuthorizationEndpoint(scope, deps);
    registerUserinfoEndpoint(scope, deps);
    registerDiscovery(scope, deps);
    registerJwks(scope, deps);
    await scope.register(async (pages) => {
      // A page's failure is a page, not JSON: the browser shows it. Causes stay in the log.
      pages.setErrorHandler((error: FastifyError, request, reply) => {
        const translated = translateFastifyError(error, bodyLimit);
        if (translated instanceof OAuthError) return sendPage(reply, errorPage(translated.status, 'Invalid request', translated.description));
        const rendered = renderOAuthError(error);
        if (rendered.status >= 500 && rendered.status !== 503) request.log.error({ err: error }, 'OAuth page failed');
        const unavailable = rendered.status === 503;
        if (unavailable) {
          return sendPage(reply.header('retry-after', rendered.headers['retry-after']), errorPage(503, 'Temporarily unavailable', 'The service is temporarily unavailable.', 'Try again in a moment.'));
        }
        return sendPage(reply, errorPage(rendered.status, 'Something went wrong', 'The server could not complete the request.'));
      });
      const pageDeps = pagesDeps(deps);
      // The authorization request answers a repeated parameter itself: by redirect to the client when its
      // redirect_uri is known (RFC 6749 §4.1.2.1), else with an error page.
      registerAuthorizeEndpoint(pages, pageDeps);
      await pages.register(async (forms) => {
        forms.addHook('preHandler', refuseRepeatedFields);
        registerLoginPage(forms, pageDeps);
        registerConsentPage(forms, pageDeps);
        registerDevicePages(forms, pageDeps);
        registerAccountPages(forms, pageDeps);
        registerLogoutEndpoint(forms, { ...pageDeps, keys: deps.keys });
      });
    });
  });
}

function pagesDeps(deps: OAuthDeps): PageDeps {
  const clock = Date.now;
  const jar = cookieJar(deps.config.issuer);
  return {
    db: deps.db.kysely,
    config: deps.config,
    jar,
    csrf: new CsrfTokens(deps.config.keyEncryptionSecret),
    sessions: new SignInSessions(deps.db.kysely, jar, deps.config.signIn.sessionTtl, clock),
    interactions: new InteractionStore(deps.db.kysely, clock),
    throttle: deps.throttle,
    knownDevices: new KnownDevices(deps.config.keyEncryptionSecret, jar, clock),
    scopeDescriptions: deps.scopeDescriptions,
    audit: deps.audit,
    forgetUser: deps.forgetUser,
    clock,
    beforeCodeIssued: deps.beforeCodeIssued,
    beforeAccountChange: deps.beforeAccountChange,
  };
}

function sendOAuthError(translated: unknown, cause: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const rendered = renderOAuthError(translated);
  if (rendered.status >= 500 && !isRefusal(translated)) request.log.error({ err: cause }, 'OAuth endpoint failed');
  return reply.status(rendered.status).headers(rendered.headers).send(rendered.body);
}

/**
 * Fastify's own 4xx errors are malformed requests, `invalid_request` in RFC 6749's terms; the status stays
 * what HTTP says (RFC 9110 §15.5.14, §15.5.16): 413 for a body over BODY_LIMIT, 415 for a body that is not a
 * form (JSON, no Content-Type), 400 for the rest.
 */
function translateFastifyError(error: FastifyError, bodyLimit: number): unknown {
  const isClientError = typeof error.code === 'string' && error.code.startsWith('FST_') && (error.statusCode ?? 500) < 500;
  if (!isClientError) return error;
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new OAuthError('invalid_request', `The request body is larger than ${bodyLimit} bytes.`, 413);
  if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return new OAuthError('invalid_request', 'The request body must be application/x-www-form-urlencoded.', 415);
  return new OAuthError('invalid_request', 'The request is malformed.');
}

/** Fields a form may send more than once: the consent and device pages' scope checkboxes. */
const REPEATABLE_FIELDS: ReadonlySet<string> = new Set(['scope']);

/**
 * A page's form names each other field once; a repeated one would be read as absent (page-reply.ts,
 * singleParam) and answered as a wrong password or an expired form, so it is refused as what it is.
 */
async function refuseRepeatedFields(request: FastifyRequest): Promise<void> {
  if (!(request.body instanceof URLSearchParams)) return;
  const seen = new Set<string>();
  for (const name of request.body.keys()) {
    if (seen.has(name) && !REPEATABLE_FIELDS.has(name)) throw new OAuthError('invalid_request', `The ${name.slice(0, 64)} field is repeated.`);
    seen.add(name);
  }
}

/**
 * A form body as RFC 6749 Appendix B defines it: UTF-8 only. Another declared charset is refused (415), and
 * so is any byte sequence, raw or percent-encoded, that is not UTF-8, and a NUL (400; parseParams in
 * page-reply.ts says why): the request would go on with a credential other than the one sent.
 */
function parseForm(contentType: string | undefined, body: Buffer): URLSearchParams {
  const charset = contentType === undefined ? null : foreignCharset(mediaTypeParameters(contentType));
  if (charset !== null) {
    throw new OAuthError('invalid_request', `The form must be UTF-8; charset=${charset} is not accepted.`, 415);
  }
  let text: string;
  try {
    text = UTF8.decode(body);
  } catch {
    throw new OAuthError('invalid_request', 'The form is not valid UTF-8.');
  }
  return parseParams(text, 'form');
}
