/**
 * oidc-provider (panva/node-oidc-provider, 8.x: the last major that supports Node 20) configured as
 * Portcullis is: the same token endpoint path, the same three clients with `client_secret_basic`, one ES256
 * key, JWT access tokens signed with it (RFC 9068 `at+jwt`) or opaque ones, the same scopes and lifetime,
 * refresh tokens rotated on every use. Its default in-memory store (an LRU in this process) keeps opaque
 * tokens, grants and refresh tokens; a JWT access token is not stored at all.
 *
 * oidc-provider issues a JWT access token only for a resource server (RFC 8707 resource indicators): one
 * resource stands for the API, chosen by default so that the request bodies are the same as Portcullis's.
 * The sign-in and consent a user would give at the authorization endpoint are given by `/interaction/:uid`
 * below at once, for the bench user, so that the refresh scenario can mint its first refresh tokens through
 * a real authorization code + PKCE flow.
 *
 * Its two start-up warnings are expected here: the in-memory adapter is the store the comparison asks for,
 * and the https issuer (the same as Portcullis's, so that tokens are the same size) is reached over plain
 * http on 127.0.0.1.
 */
import http from 'node:http';
import { exportJWK, generateKeyPair } from 'jose';
import Provider, { type Configuration, type KoaContextWithOIDC } from 'oidc-provider';
import { ACCESS_TOKEN_TTL, BENCH_SECRET, JWT_CLIENT, OPAQUE_CLIENT, REDIRECT_URI, REFRESH_CLIENT, SCOPE } from './token-clients.js';

const issuer = process.env.ISSUER ?? 'https://bench.invalid';
/** The API as a resource server; the same value Portcullis puts in `aud` (its issuer). */
const RESOURCE = issuer;
const ACCOUNT = 'bench-user';

const { privateKey } = await generateKeyPair('ES256', { extractable: true });
const signingKey = { ...(await exportJWK(privateKey)), kid: 'bench-es256', alg: 'ES256', use: 'sig' };

const confidential = { client_secret: BENCH_SECRET, token_endpoint_auth_method: 'client_secret_basic' } as const;
const configuration: Configuration = {
  clients: [
    { client_id: JWT_CLIENT, ...confidential, grant_types: ['client_credentials'], response_types: [], redirect_uris: [] },
    { client_id: OPAQUE_CLIENT, ...confidential, grant_types: ['client_credentials'], response_types: [], redirect_uris: [] },
    { client_id: REFRESH_CLIENT, ...confidential, grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], redirect_uris: [REDIRECT_URI] },
  ],
  clientDefaults: { id_token_signed_response_alg: 'ES256' },
  jwks: { keys: [signingKey] },
  cookies: { keys: ['bench-cookie-key-0123456789abcdef'] },
  routes: { token: '/oauth/token', authorization: '/oauth/authorize' },
  scopes: ['openid', 'offline_access'],
  rotateRefreshToken: true,
  findAccount: (_ctx: KoaContextWithOIDC, sub: string) => ({ accountId: sub, claims: () => ({ sub }) }),
  interactions: { url: (_ctx: KoaContextWithOIDC, interaction) => `/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (_ctx, _client, oneOf) => oneOf ?? RESOURCE,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, _resource, client) => ({
        scope: SCOPE,
        accessTokenTTL: ACCESS_TOKEN_TTL,
        accessTokenFormat: client.clientId === OPAQUE_CLIENT ? 'opaque' : 'jwt',
        jwt: { sign: { alg: 'ES256' } },
      }),
    },
  },
};
const provider = new Provider(issuer, configuration);
const handle = provider.callback();

/** The bench user signs in and consents to everything the client asked for. */
async function approve(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
  const details = await provider.interactionDetails(request, response);
  const grant = new provider.Grant({ accountId: ACCOUNT, clientId: String(details.params.client_id) });
  const requested = String(details.params.scope ?? '').split(' ');
  const oidcScopes = requested.filter((scope) => scope === 'openid' || scope === 'offline_access');
  if (oidcScopes.length > 0) grant.addOIDCScope(oidcScopes.join(' '));
  grant.addResourceScope(RESOURCE, SCOPE);
  const grantId = await grant.save();
  await provider.interactionFinished(request, response, { login: { accountId: ACCOUNT }, consent: { grantId } }, { mergeWithLastSubmission: false });
}

const server = http.createServer((request, response) => {
  if (request.url?.startsWith('/interaction/')) {
    approve(request, response).catch((error: unknown) => {
      response.statusCode = 500;
      response.end(String(error));
    });
    return;
  }
  void handle(request, response);
});
// Fastify's default, so that both servers keep idle connections alike.
server.keepAliveTimeout = 72_000;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address() as { port: number };
process.stdout.write(`${JSON.stringify({ bench: { port, pid: process.pid } })}\n`);
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
