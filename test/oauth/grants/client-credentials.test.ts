import { describe, expect, it } from 'vitest';
import { grantClientCredentials } from '../../../src/oauth/grants/client-credentials.js';
import { OAuthError } from '../../../src/oauth/oauth-error.js';
import type { ClientRecord } from '../../../src/storage/clients.js';

const client: ClientRecord = {
  id: 'c1',
  clientId: 'reports',
  name: 'Reports',
  type: 'confidential',
  redirectUris: [],
  grantTypes: ['client_credentials'],
  scopes: ['read:posts', 'write:posts', 'openid', 'offline_access'],
  role: 'member',
  accessTokenFormat: 'jwt',
  accessTokenTtl: 600,
  rateLimit: null,
  firstParty: false,
  legacy: false,
  postLogoutRedirectUris: [],
  idTokenSignedResponseAlg: 'RS256',
  revocations: 0,
  createdAt: '2024-01-01T00:00:00.000Z',
  updatedAt: '2024-01-01T00:00:00.000Z',
};

function errorOf(run: () => unknown): OAuthError {
  try {
    run();
  } catch (error) {
    if (error instanceof OAuthError) return error;
    throw error;
  }
  throw new Error('expected an OAuthError');
}

describe('client_credentials grant', () => {
  it('grants every grantable scope of the client when none is requested, to the client itself', () => {
    expect(grantClientCredentials(client, {})).toEqual({ subject: 'reports', subjectType: 'client', scopes: ['read:posts', 'write:posts'] });
  });

  it('grants a requested subset, once each', () => {
    expect(grantClientCredentials(client, { scope: 'read:posts read:posts' }).scopes).toEqual(['read:posts']);
  });

  it('refuses scopes the client does not have', () => {
    const error = errorOf(() => grantClientCredentials(client, { scope: 'read:posts read:users' }));
    expect([error.error, error.description, error.status]).toEqual(['invalid_scope', 'The client may not request: read:users.', 400]);
  });

  it('never grants user scopes such as openid and offline_access', () => {
    expect(errorOf(() => grantClientCredentials(client, { scope: 'openid' })).error).toBe('invalid_scope');
    expect(errorOf(() => grantClientCredentials(client, { scope: 'offline_access' })).error).toBe('invalid_scope');
  });

  it('refuses a malformed scope parameter', () => {
    expect(errorOf(() => grantClientCredentials(client, { scope: 'read:posts  write:posts' })).error).toBe('invalid_scope');
    expect(errorOf(() => grantClientCredentials(client, { scope: 'read:"posts"' })).error).toBe('invalid_scope');
  });

  it('refuses public clients and clients not registered for the grant', () => {
    expect(errorOf(() => grantClientCredentials({ ...client, type: 'public' }, {})).error).toBe('unauthorized_client');
    expect(errorOf(() => grantClientCredentials({ ...client, grantTypes: ['authorization_code'] }, {})).error).toBe('unauthorized_client');
  });

  it('refuses when the client has no grantable scope at all', () => {
    expect(errorOf(() => grantClientCredentials({ ...client, scopes: ['openid'] }, {})).error).toBe('invalid_scope');
  });
});
