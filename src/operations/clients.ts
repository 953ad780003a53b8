import { ApiError } from '../errors/registry.js';
import { digestSecret, generateSecret } from '../oauth/secrets.js';
import { revokeClientTokens } from '../oauth/tokens/access-token-records.js';
import { recordInvalidation } from '../storage/invalidations.js';
import { clientRow } from '../storage/clients.js';
import { newId, nowIso } from '../storage/ids.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import { checkClientSettings } from './client-settings.js';
import { listReadable, pageBody, pageRequest } from './resources.js';
import type { Handler } from './types.js';
import { viewOf, viewsOf } from './views.js';

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
    // Absent and null are the same: a client without client_credentials has no role of its own.
    role: body.role ?? null,
    accessTokenFormat: body.accessTokenFormat ?? 'jwt',
    accessTokenTtl: body.accessTokenTtl ?? deps.defaultAccessTokenTtl,
    firstParty: body.firstParty ?? false,
    legacy: body.legacy ?? false,
    // Validation filled in the contract's defaults ([] and RS256).
    postLogoutRedirectUris: body.postLogoutRedirectUris,
    idTokenSignedResponseAlg: body.idTokenSignedResponseAlg,
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
  // A full replacement (RFC 9110 §9.3.4): what the body leaves out takes its default, as on creation
  // (validation filled in the contract's defaults; a role has none, absent being null).
  const replaced = { ...body, role: body.role ?? null };
  const updatedAt = nowIso();
  await deps.db.transaction().execute(async (trx) => {
    await trx
      .updateTable('clients')
      .set({
        name: body.name,
        redirectUris: JSON.stringify(replaced.redirectUris),
        postLogoutRedirectUris: JSON.stringify(replaced.postLogoutRedirectUris),
        grantTypes: JSON.stringify(replaced.grantTypes),
        scopes: JSON.stringify(replaced.scopes),
        role: replaced.role,
        accessTokenFormat: replaced.accessTokenFormat,
        accessTokenTtl: replaced.accessTokenTtl,
        idTokenSignedResponseAlg: replaced.idTokenSignedResponseAlg,
        firstParty: replaced.firstParty,
        legacy: replaced.legacy,
        updatedAt,
      })
      .where('id', '=', current.id)
      .execute();
    // Role, scopes and settings: every server re-reads the registration, and narrows the tokens it issued.
    await recordInvalidation(trx, 'client', current.clientId);
  });
  deps.invalidateSubject(current.clientId);
  return { status: 200, body: { ...current, ...replaced, type: current.type } };
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
