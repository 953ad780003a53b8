import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/config.js';
import { renderOAuthError } from '../errors/oauth-renderer.js';
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
import type { PageDeps } from './browser/page-deps.js';
import { SignInSessions } from './browser/sign-in-sessions.js';
import { registerAuthorizeEndpoint } from './endpoints/authorize.js';
import { registerConsentPage } from './endpoints/consent.js';
import { registerLoginPage } from './endpoints/login.js';
import { sendPage } from './endpoints/page-reply.js';
import { registerIntrospectionEndpoint } from './endpoints/introspect.js';
import { registerDeviceAuthorizationEndpoint } from './endpoints/device-authorization.js';
import { registerDevicePages } from './endpoints/device-pages.js';
import { registerAccountPages } from './endpoints/account.js';
import { registerLogoutEndpoint } from './endpoints/logout.js';
import { registerUserinfoEndpoint } from './endpoints/userinfo.js';
import type { Principal } from '../policy/principal.js';
import { errorPage } from './pages/error-page.js';

export interface OAuthDeps {
  db: Db;
  /** Where the token endpoint's decisions go (see src/audit/). */
  audit: TokenEndpointDeps['audit'];
  config: Config;
  keys: KeyStore;
  tokens: TokenService;
  /** The scope catalogue, published as `scopes_supported`. */
  scopes: readonly string[];
  /** Requests per address and window (RATE_LIMIT_ANONYMOUS_MAX); absent in unit tests of the endpoints. */
  limiter?: RateLimiter;
  /** Failed passwords per account and address (login page, password grant). */
  throttle: SignInThrottle;
  /** The contract's scope catalogue with descriptions, for the consent page. */
  scopeDescriptions: Readonly<Record<string, string>>;
  /** Drops what this process cached about a user's tokens. */
  forgetUser(userId: string): void;
  /** The API's bearer authentication (userinfo and introspection check tokens exactly as every API request). */
  authenticateBearer(authorization: string | undefined): Promise<Principal>;
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
    scope.setErrorHandler(sendOAuthError);
    if (deps.limiter) {
      const limiter = deps.limiter;
      // Per address: credential guessing and token storms are slowed before any secret is checked.
      scope.addHook('onRequest', async (request, reply) => {
        const limit = await limiter.oauth.consume(request.ip);
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
        const translated = translateFastifyError(error);
        if (translated instanceof OAuthError) return sendPage(reply, errorPage(translated.status, 'Invalid request', translated.description));
        const rendered = renderOAuthError(error);
        if (rendered.status >= 500 && rendered.status !== 503) request.log.error({ err: error }, 'OAuth page failed');
        const unavailable = rendered.status === 503;
        if (unavailable) return sendPage(reply, errorPage(503, 'Temporarily unavailable', 'The service is temporarily unavailable.', 'Try again in a moment.'));
        return sendPage(reply, errorPage(rendered.status, 'Something went wrong', 'The server could not complete the request.'));
      });
      const pageDeps = pagesDeps(deps);
      registerAuthorizeEndpoint(pages, pageDeps);
      registerLoginPage(pages, pageDeps);
      registerConsentPage(pages, pageDeps);
      registerDevicePages(pages, pageDeps);
      registerAccountPages(pages, pageDeps);
      registerLogoutEndpoint(pages, { ...pageDeps, keys: deps.keys });
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
    scopeDescriptions: deps.scopeDescriptions,
    audit: deps.audit,
    forgetUser: deps.forgetUser,
    clock,
  };
}

function sendOAuthError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const rendered = renderOAuthError(translateFastifyError(error));
  if (rendered.status >= 500) request.log.error({ err: error }, 'OAuth endpoint failed');
  return reply.status(rendered.status).headers(rendered.headers).send(rendered.body);
}

/** Fastify's own 4xx errors (unsupported media type, body too large, bad body) are malformed requests. */
const FASTIFY_CLIENT_ERRORS: Readonly<Record<string, string>> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'The request body must be application/x-www-form-urlencoded.',
  FST_ERR_CTP_BODY_TOO_LARGE: 'The request body is too large.',
};

function translateFastifyError(error: FastifyError): unknown {
  const isClientError = typeof error.code === 'string' && error.code.startsWith('FST_') && (error.statusCode ?? 500) < 500;
  if (!isClientError) return error;
  return new OAuthError('invalid_request', FASTIFY_CLIENT_ERRORS[error.code] ?? 'The request is malformed.');
}

/**
 * A form body as RFC 6749 Appendix B defines it: UTF-8 only. Another declared charset is refused (415), and
 * so is any byte sequence, raw or percent-encoded, that is not UTF-8 (400): URLSearchParams would turn it
 * into replacement characters and the request would go on with a credential other than the one sent.
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
  const form = new URLSearchParams(text);
  for (const [name, value] of form) {
    if (name.includes('\uFFFD') || value.includes('\uFFFD')) throw new OAuthError('invalid_request', 'The form is not valid UTF-8 once percent-decoded.');
  }
  return form;
}
