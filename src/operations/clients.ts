import { ApiError } from '../errors/registry.js';
import { digestSecret, generateSecret } from '../oauth/secrets.js';
import { revokeClientTokens } from '../oauth/tokens/access-token-records.js';
import { recordInvalidation } from '../storage/invalidations.js';
import { deleteClientRow, insertClient, updateClientSettings } from '../storage/clients.js';
import { newId, nextVersion, nowIso } from '../storage/ids.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import { clients } from '../resources/clients.js';
import { listReadable } from '../resources/lists.js';
import { checkClientSettings } from './client-settings.js';
import { pageBody, pageRequest } from './pages.js';
import { changedMeanwhile } from './changed-meanwhile.js';
import type { Handler } from './types.js';

export const listClients: Handler<'listClients'> = async ({ query }, { principal, deps }) => {
  const page = await listReadable(deps, principal, clients, query, pageRequest(query));
  return { status: 200, body: pageBody(page.rows.map(clients.viewOf), page, query.limit ?? 20) };
};

export const getClient: Handler<'getClient'> = (_input, { resource }) => ({ status: 200, body: clients.viewOf(resource!) });

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
    rateLimit: body.rateLimit ?? null,
    firstParty: body.firstParty ?? false,
    legacy: body.legacy ?? false,
    // Validation filled in the contract's defaults ([] and RS256).
    postLogoutRedirectUris: body.postLogoutRedirectUris,
    idTokenSignedResponseAlg: body.idTokenSignedResponseAlg,
  };
  try {
    // The client_id may have belonged to a deleted registration that a server still has cached: the
    // registration and its invalidation are one commit.
    await deps.db.transaction().execute((trx) => insertClient(trx, client, now));
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
  const current = clients.viewOf(resource!);
  if (body.type !== current.type) {
    throw new ApiError('VALIDATION_FAILED', 'A client type cannot change.', { details: [{ path: '/body/type', message: 'is immutable' }] });
  }
  // A full replacement (RFC 9110 §9.3.4): what the body leaves out takes its default, as on creation
  // (validation filled in the contract's defaults; a role has none, absent being null).
  const replaced = { ...body, role: body.role ?? null, rateLimit: body.rateLimit ?? null };
  const updatedAt = nextVersion(String(resource!.updatedAt));
  await deps.db.transaction().execute(async (trx) => {
    if (!(await updateClientSettings(trx, current.id, String(resource!.updatedAt), replaced, updatedAt))) throw changedMeanwhile();
    // Role, scopes and settings: every server re-reads the registration, and narrows the tokens it issued.
    await recordInvalidation(trx, 'client', current.clientId);
  });
  deps.invalidateSubject(current.clientId);
  return { status: 200, body: { ...current, ...replaced, type: current.type } };
};

export const deleteClient: Handler<'deleteClient'> = async (_input, { resource, deps }) => {
  const { id, clientId } = clients.viewOf(resource!);
  await deps.db.transaction().execute(async (trx) => {
    await revokeClientTokens(trx, clientId, nowIso());
    await deleteClientRow(trx, id);
  });
  deps.invalidateSubject(clientId);
  return { status: 204, body: undefined };
};
