import { effectivePermissions } from '../policy/decide.js';
import type { TokenPrincipal } from '../policy/principal.js';
import type { Handler } from './types.js';

export const getRestContract: Handler<'getRestContract'> = async (_input, { deps }) => ({
  status: 200,
  // Already serialised once at start-up; sent as is.
  body: deps.publishedSpec as never,
});

export const getGraphqlSchema: Handler<'getGraphqlSchema'> = async (_input, { deps }) => ({
  status: 200,
  body: deps.graphqlSdl as never,
});

export const getAuthorization: Handler<'getAuthorization'> = async (_input, { principal, deps }) => {
  const p = principal as TokenPrincipal;
  const scopes = [...p.scopes].sort();
  return {
    status: 200,
    body: {
      principal: { type: p.kind, id: p.id, clientId: p.clientId, role: p.role },
      roles: [p.role],
      permissions: [...(deps.policy.roles[p.role]?.permissions ?? [])],
      scopes,
      effectivePermissions: effectivePermissions(deps.policy, p.role, p.scopes),
    } as never,
  };
};

export const getTokenInfo: Handler<'getTokenInfo'> = async (_input, { principal }) => {
  const p = principal as TokenPrincipal;
  return {
    status: 200,
    body: {
      active: true,
      tokenType: 'Bearer',
      format: p.token.format,
      clientId: p.clientId,
      subject: p.subject,
      scopes: [...p.scopes].sort(),
      grantType: p.token.grantType,
      issuedAt: new Date(p.token.issuedAt * 1000).toISOString(),
      expiresAt: new Date(p.token.expiresAt * 1000).toISOString(),
      jti: p.token.jti,
    } as never,
  };
};
