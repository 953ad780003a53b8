import { effectivePermissions } from '../policy/decide.js';
import type { TokenPrincipal } from '../policy/principal.js';
import type { components } from '../../generated/openapi.js';
import type { Handler } from './types.js';

// Roles, scopes and grant types in a token were checked against policy.yaml and the contract's catalogue
// when it was issued, so they are the contract's values.
type Role = components['schemas']['Role'];
type Scope = components['schemas']['Scope'];
type GrantType = components['schemas']['GrantType'];

export const getRestContract: Handler<'getRestContract'> = async (_input, { deps }) => ({
  status: 200,
  // Already serialised once at start-up; sent as is.
  body: deps.publishedSpec as never,
});

export const getGraphqlSchema: Handler<'getGraphqlSchema'> = async (_input, { deps }) => ({
  status: 200,
  body: deps.graphqlSdl,
});

export const getAuthorization: Handler<'getAuthorization'> = async (_input, { principal, deps }) => {
  const p = principal as TokenPrincipal;
  const scopes = [...p.scopes].sort() as Scope[];
  const role = p.role as Role;
  return {
    status: 200,
    body: {
      principal: { type: p.kind, id: p.id, clientId: p.clientId, role },
      roles: [role],
      permissions: [...(deps.policy.roles[p.role]?.permissions ?? [])],
      scopes,
      effectivePermissions: effectivePermissions(deps.policy, p.role, p.scopes),
    },
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
      scopes: [...p.scopes].sort() as Scope[],
      grantType: p.token.grantType as GrantType,
      issuedAt: new Date(p.token.issuedAt * 1000).toISOString(),
      expiresAt: new Date(p.token.expiresAt * 1000).toISOString(),
      jti: p.token.jti,
    },
  };
};
