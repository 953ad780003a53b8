import Fastify, { type FastifyInstance } from 'fastify';
import type { AuditDecision } from '../../src/audit/audit-event.js';
import type { Config } from '../../src/config/config.js';
import { KeyStore } from '../../src/oauth/keys/key-store.js';
import { registerOAuth, type OAuthDeps } from '../../src/oauth/routes.js';
import { TokenService } from '../../src/oauth/tokens/token-service.js';
import { RegisteredClients } from '../../src/oauth/registered-clients.js';
import { InvalidationFeed } from '../../src/oauth/tokens/invalidation-feed.js';
import { SignInThrottle } from '../../src/limits/sign-in-throttle.js';
import { authenticate } from '../../src/pipeline/authenticate.js';
import { SubjectDirectory } from '../../src/pipeline/subject-directory.js';
import type { Db } from '../../src/storage/dialect.js';

export const SCOPES = ['read:posts', 'write:posts', 'read:users', 'openid'] as const;

export interface OAuthApp {
  app: FastifyInstance;
  keys: KeyStore;
  tokens: TokenService;
  clients: RegisteredClients;
  /** Follows the invalidations table as a server does; `poll()` applies what changed without waiting for the timer. */
  invalidations: InvalidationFeed;
  /** The decisions the endpoints sent to the audit log, in order. */
  decisions: AuditDecision[];
}

/** The test-only seams of the OAuth routes: where a grant or a code issuance waits for the test. */
export type OAuthSeams = Pick<OAuthDeps, 'beforeGrantCommit' | 'duringGrantCommit' | 'beforeCodeIssued' | 'beforeAccountChange'>;

/** A real Fastify instance with the OAuth routes and, beside them, a JSON route like the REST API's. */
export async function buildOAuthApp(db: Db, config: Config, scopes: readonly string[] = SCOPES, seams: OAuthSeams = {}): Promise<OAuthApp> {
  const keys = await KeyStore.open(db, config);
  const tokens = new TokenService({ db, config, keys });
  const subjects = new SubjectDirectory(db.kysely);
  const clients = new RegisteredClients(db.kysely);
  // What the server does on every change another process records (src/app.ts), for these endpoints' caches.
  const invalidations = new InvalidationFeed(db.kysely, {
    apply(events) {
      for (const { kind, target } of events) {
        if (kind === 'client') clients.forget(target);
        if (kind === 'token') tokens.evictJti(target);
        else if (kind === 'grant') tokens.evictGrant(target);
        else if (kind === 'user') tokens.evictSubject(target, 'user');
        else tokens.evictClient(target);
      }
    },
    reset() {
      clients.clear();
      tokens.evictWhere(() => true);
    },
  });
  await invalidations.start();
  const app = Fastify({ bodyLimit: config.http.bodyLimit });
  app.addHook('onClose', () => invalidations.stop());
  app.post('/v1/echo', async (request) => request.body);
  const decisions: AuditDecision[] = [];
  await registerOAuth(app, {
    db,
    clients,
    audit: { record: (decision) => decisions.push(decision) },
    config,
    keys,
    tokens,
    scopes,
    throttle: new SignInThrottle(),
    scopeDescriptions: Object.fromEntries(scopes.map((scope) => [scope, `Description of ${scope}`])),
    forgetUser: (userId) => tokens.evictSubject(userId, 'user'),
    authenticateBearer: async (authorization) => authenticate({ authorization, tokenInQuery: false }, { tokens, subjects }),
    ...seams,
  });
  await app.ready();
  return { app, keys, tokens, clients, invalidations, decisions };
}

/** RFC 6749 §2.3.1: form-urlencode each part, then base64 the pair. */
export function basic(clientId: string, secret: string): string {
  const encode = (value: string) => encodeURIComponent(value).replace(/%20/g, '+');
  return `Basic ${Buffer.from(`${encode(clientId)}:${encode(secret)}`).toString('base64')}`;
}

export function form(params: Record<string, string>): string {
  return new URLSearchParams(params).toString();
}

export const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
