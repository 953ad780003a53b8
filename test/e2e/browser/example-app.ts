import { startAuthServer, type AuthServer } from './auth-server.js';
import { startSpaServer, type SpaServer } from './spa-server.js';
import { testCertificate } from './tls.js';

export const EXAMPLE_APP_SCOPE = 'openid profile read:posts';

export interface ExampleApp {
  spa: SpaServer;
  server: AuthServer;
  clientId: string;
  close(): Promise<void>;
}

/**
 * The single-page app in spa/ on its own https origin, registered through the API as a public client of a
 * Portcullis on https that allows that origin (CORS_ORIGINS) to call its token endpoint and API.
 */
export async function startExampleApp(): Promise<ExampleApp> {
  const tls = testCertificate();
  const spa = await startSpaServer(tls);
  let server: AuthServer | undefined;
  try {
    server = await startAuthServer({ CORS_ORIGINS: spa.origin }, tls);
    const { clientId } = await server.registerClient({
      name: 'Example app',
      type: 'public',
      redirectUris: [spa.redirectUri, spa.silentRedirectUri],
      postLogoutRedirectUris: [spa.postLogoutRedirectUri],
      // No refresh_token: a browser app renews with prompt=none.
      grantTypes: ['authorization_code'],
      scopes: EXAMPLE_APP_SCOPE.split(' '),
    });
    spa.configure({ issuer: server.issuer, clientId, scope: EXAMPLE_APP_SCOPE });
    const started = server;
    return {
      spa,
      server,
      clientId,
      async close() {
        await started.close();
        await spa.close();
      },
    };
  } catch (error) {
    await server?.close();
    await spa.close();
    throw error;
  }
}
