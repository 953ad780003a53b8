import { ApiError, type ErrorDetail } from '../errors/registry.js';
import { digestSecret, generateSecret } from '../oauth/secrets.js';
import { revokeClientTokens } from '../oauth/tokens/access-token-records.js';
import { recordInvalidation } from '../storage/invalidations.js';
import type { PolicyTable } from '../policy/table.js';
import { clientRow } from '../storage/clients.js';
import { newId, nowIso } from '../storage/ids.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import { listReadable, pageBody, pageRequest } from './resources.js';
import type { Handler } from './types.js';
import { viewOf, viewsOf } from './views.js';

interface ClientSettings {
  type: string;
  redirectUris: string[];
  grantTypes: string[];
  scopes: string[];
  role: string;
}

/** Rules a registration must satisfy beyond its schema (RFC 6749 §2, RFC 8252 §7.3, RFC 9700 §2.1). */
export function checkClientSettings(policy: PolicyTable, settings: ClientSettings): void {
  const details: ErrorDetail[] = [];
  settings.scopes.forEach((scope, i) => {
    if (!(scope in policy.scopes)) details.push({ path: `/body/scopes/${i}`, message: `unknown scope "${scope}"` });
  });
  if (!(settings.role in policy.roles)) details.push({ path: '/body/role', message: `unknown role "${settings.role}"` });
  if (settings.type === 'public' && settings.grantTypes.includes('client_credentials')) {
    details.push({ path: '/body/grantTypes', message: 'a public client cannot use client_credentials' });
  }
  if (settings.grantTypes.includes('authorization_code') && settings.redirectUris.length === 0) {
    details.push({ path: '/body/redirectUris', message: 'authorization_code needs at least one redirect URI' });
  }
  settings.redirectUris.forEach((uri, i) => {
    let url: URL | null = null;
    try {
      url = new URL(uri);
    } catch {
      // reported below
    }
    const loopback = url !== null && url.protocol === 'http:' && ['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname);
    if (url === null || url.hash !== '' || !(url.protocol === 'https:' || loopback || !/^https?:$/.test(url.protocol))) {
      details.push({ path: `/body/redirectUris/${i}`, message: 'must be an absolute https (or loopback http) URI without a fragment' });
    }
  });
  if (details.length > 0) throw new ApiError('VALIDATION_FAILED', 'The client registration is not valid.', { details });
}

export const listClients: Handler<'listClients'> = async ({ query }, { principal, deps }) => {
  const page = await listReadable(deps, principal, 'client', [], pageRequest(query));
  return { status: 200, body: pageBody(viewsOf('client', page.rows), page, query.limit ?? 20) };
};

export const getClient: Handler<'getClient'> = async (_input, { resource }) => ({ status: 200, body: viewOf('client', resource!) });

export const createClient: Handler<'createClient'> = async ({ body }, { deps }) => {
  checkClientSettings(deps.policy, body);
  // A confidential client's secret is shown once, here; only its SHA-256 digest is stored.
  const secret = body.type === 'confidential' ? generateSecret() : null;
  const now = nowIso();
  const client = {
    id: newId(),
    clientId: body.clientId ?? `client-${newId()}`,
    name: body.name,
    type: body.type,
    secretHash: secret === null ? null : digestSecret(secret),
    redirectUris: body.redirectUris,
    grantTypes: body.grantTypes,
    scopes: body.scopes,
    role: body.role,
    accessTokenFormat: body.accessTokenFormat ?? 'jwt',
    accessTokenTtl: body.accessTokenTtl ?? 600,
    firstParty: body.firstParty ?? false,
    legacy: body.legacy ?? false,
    postLogoutRedirectUris: [] as string[],
    idTokenSignedResponseAlg: 'RS256' as const,
  };
  try {
    await deps.db.transaction().execute(async (trx) => {
      await trx.insertInto('clients').values(clientRow(client, now, now)).execute();
      // The client_id may have belonged to a deleted registration that a server still has cached.
      await recordInvalidation(trx, 'client', client.clientId);
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw new ApiError('CONFLICT', 'A client with this clientId already exists.');
    throw error;
  }
  deps.invalidateSubject(client.clientId);
  const { secretHash: _digest, ...view } = client;
  return {
    status: 201,
    body: { ...view, createdAt: now, ...(secret === null ? {} : { clientSecret: secret }) },
    headers: { location: `/v1/clients/${client.id}` },
    secrets: ['clientSecret'],
  };
};

export const replaceClient: Handler<'replaceClient'> = async ({ body }, { resource, deps }) => {
  checkClientSettings(deps.policy, body);
  const current = viewOf('client', resource!);
  if (body.type !== current.type) {
    throw new ApiError('VALIDATION_FAILED', 'A client type cannot change.', { details: [{ path: '/body/type', message: 'is immutable' }] });
  }
  const updatedAt = nowIso();
  await deps.db.transaction().execute(async (trx) => {
    await trx
      .updateTable('clients')
      .set({
        name: body.name,
        redirectUris: JSON.stringify(body.redirectUris),
        grantTypes: JSON.stringify(body.grantTypes),
        scopes: JSON.stringify(body.scopes),
        role: body.role,
        accessTokenFormat: body.accessTokenFormat,
        accessTokenTtl: body.accessTokenTtl,
        firstParty: body.firstParty,
        legacy: body.legacy,
        updatedAt,
      })
      .where('id', '=', current.id)
      .execute();
    // Role, scopes and settings: every server re-reads the registration, and narrows the tokens it issued.
    await recordInvalidation(trx, 'client', current.clientId);
  });
  deps.invalidateSubject(current.clientId);
  return { status: 200, body: { ...current, ...body, type: current.type } };
};

export const deleteClient: Handler<'deleteClient'> = async (_input, { resource, deps }) => {
  const { id, clientId } = viewOf('client', resource!);
  await deps.db.transaction().execute(async (trx) => {
    await revokeClientTokens(trx, clientId, nowIso());
    await trx.deleteFrom('clients').where('id', '=', id).execute();
  });
  deps.invalidateSubject(clientId);
  return { status: 204, body: undefined };
};
