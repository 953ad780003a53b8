import type { Kysely } from 'kysely';
import type { components } from '../../generated/openapi.js';
import { policy } from '../../generated/policy.js';
import { isApiError } from '../errors/registry.js';
import { DEVICE_CODE } from '../oauth/device/device-authorization.js';
import { SERVED_GRANT_TYPES, type ServedGrantType } from '../oauth/grant-types.js';
import { digestSecret, generateSecret } from '../oauth/secrets.js';
import { revokeClientTokens } from '../oauth/tokens/access-token-records.js';
import { checkClientSettings } from '../operations/client-settings.js';
import { findClientByClientId, insertClient, toClientRecord, type ClientRecord, type ClientWithSecret } from '../storage/clients.js';
import { newId, nextVersion, nowIso } from '../storage/ids.js';
import { lockClientVersion } from '../storage/row-locks.js';
import type { Database } from '../storage/schema.js';
import { recordInvalidation } from '../storage/invalidations.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import { EXIT_OK } from './cli-errors.js';
import { JSON_OPTION, type Command, type CommandGroup } from './command.js';
import { checkContractInput, invalidOptions } from './contract-input.js';
import { parseInteger } from './option-values.js';
import { writeFields, writeJson, writeLine, writeTable } from './output.js';

/** Contract field -> the option that sets it, for error messages. */
const CLIENT_OPTIONS = {
  clientId: 'client-id',
  name: 'name',
  type: 'type',
  grantTypes: 'grant',
  scopes: 'scope',
  role: 'role',
  redirectUris: 'redirect-uri',
  postLogoutRedirectUris: 'post-logout-redirect-uri',
  accessTokenFormat: 'format',
  accessTokenTtl: 'ttl',
  rateLimit: 'rate-limit',
  idTokenSignedResponseAlg: 'id-token-alg',
  firstParty: 'first-party',
  legacy: 'legacy',
} as const;

/**
 * `--grant device_code` for RFC 8628's `urn:ietf:params:oauth:grant-type:device_code`: the URN is the
 * grant's name everywhere else (the contract's GrantType, the REST API, the token endpoint), typed in full
 * here it is only a chance to mistype it.
 */
const GRANT_SHORT_FORMS: Readonly<Record<string, ServedGrantType>> = { device_code: DEVICE_CODE };

function expandGrantTypes(values: unknown): unknown {
  return Array.isArray(values) ? values.map((value) => (typeof value === 'string' ? (GRANT_SHORT_FORMS[value] ?? value) : value)) : values;
}

/**
 * The contract's ClientCreate after validation, which fills in every default (clientId and role stay
 * optional, and accessTokenTtl and rateLimit, whose defaults are the server's ACCESS_TOKEN_TTL and RATE_LIMIT_MAX).
 */
type ClientCreate = components['schemas']['ClientCreate'];
type ServerDefaulted = 'clientId' | 'role' | 'accessTokenTtl' | 'rateLimit';
type ClientCreateBody = Required<Omit<ClientCreate, ServerDefaulted>> & Pick<ClientCreate, ServerDefaulted>;

/** What may be shown: everything but the secret digest. */
/** As the API shows a client: no secret digest, no revocation count. */
function viewOf({ secretHash: _digest, revocations: _revocations, ...client }: ClientWithSecret): Omit<ClientRecord, 'revocations'> {
  return client;
}

async function findClientOrFail(db: Kysely<Database>, clientId: string): Promise<ClientWithSecret> {
  const client = await findClientByClientId(db, clientId);
  if (!client) throw new Error(`no client ${clientId}`);
  return client;
}

/** POST /v1/clients's rules, both halves: the contract schema, then checkClientSettings (client-settings.ts). */
function checkClientOptions(options: Record<string, unknown>): ClientCreateBody {
  const body = checkContractInput<ClientCreateBody>(
    'createClient',
    'body',
    {
      name: options.name,
      type: options.type,
      grantTypes: expandGrantTypes(options.grant),
      scopes: options.scope,
      redirectUris: options['redirect-uri'] ?? [],
      ...(options.role !== undefined ? { role: options.role } : {}),
      ...(options['post-logout-redirect-uri'] !== undefined ? { postLogoutRedirectUris: options['post-logout-redirect-uri'] } : {}),
      ...(options['client-id'] !== undefined ? { clientId: options['client-id'] } : {}),
      ...(options.format !== undefined ? { accessTokenFormat: options.format } : {}),
      ...(options.ttl !== undefined ? { accessTokenTtl: parseInteger('ttl', options.ttl) } : {}),
      ...(options['rate-limit'] !== undefined ? { rateLimit: parseInteger('rate-limit', options['rate-limit']) } : {}),
      ...(options['id-token-alg'] !== undefined ? { idTokenSignedResponseAlg: options['id-token-alg'] } : {}),
      ...(options['first-party'] ? { firstParty: true } : {}),
      ...(options.legacy ? { legacy: true } : {}),
    },
    CLIENT_OPTIONS,
  );
  try {
    checkClientSettings(policy, body);
  } catch (error) {
    if (isApiError(error) && error.details) throw invalidOptions(error.details, CLIENT_OPTIONS);
    throw error;
  }
  return body;
}

const createClientCommand: Command = {
  name: 'create',
  summary: 'Register an OAuth client; a confidential client\'s secret is printed once',
  options: {
    name: { type: 'string', value: 'NAME', required: true, description: 'display name' },
    type: { type: 'string', value: 'TYPE', required: true, description: 'confidential or public' },
    grant: {
      type: 'string',
      value: 'GRANT',
      multiple: true,
      required: true,
      description: `grant type: ${SERVED_GRANT_TYPES.map((grant) => (grant === DEVICE_CODE ? `${DEVICE_CODE} (or device_code)` : grant)).join(', ')}`,
    },
    scope: { type: 'string', value: 'SCOPE', multiple: true, required: true, description: 'a scope the client may request' },
    role: { type: 'string', value: 'ROLE', description: 'role of its client-credentials tokens (with client_credentials only, and then required)' },
    'redirect-uri': { type: 'string', value: 'URI', multiple: true, description: 'exact redirect URI (authorization_code)' },
    'post-logout-redirect-uri': { type: 'string', value: 'URI', multiple: true, description: 'exact redirect URI after sign-out (authorization_code)' },
    'client-id': { type: 'string', value: 'ID', description: 'client_id to use instead of a generated one' },
    format: { type: 'string', value: 'jwt|opaque', description: 'access token format (default jwt)' },
    ttl: { type: 'string', value: 'SECONDS', description: 'access token lifetime, 300..3600 (default: ACCESS_TOKEN_TTL, 600)' },
    'rate-limit': { type: 'string', value: 'N', description: 'requests per rate-limit window, its users\' included (default: RATE_LIMIT_MAX)' },
    'id-token-alg': { type: 'string', value: 'RS256|ES256', description: 'ID token signing algorithm (default RS256)' },
    'first-party': { type: 'boolean', description: 'mark as first-party' },
    legacy: { type: 'boolean', description: 'allow the password grant when the server allows it too' },
    json: JSON_OPTION,
  },
  async run({ options }, { db, config }) {
    const body = checkClientOptions(options);
    // Only the SHA-256 digest is stored (secrets.ts says why a slow hash is not needed here).
    const secret = body.type === 'confidential' ? generateSecret() : null;
    // The same generated form as POST /v1/clients when no client_id is given.
    const clientId = body.clientId ?? `client-${newId()}`;
    let client: ClientWithSecret;
    try {
      const record = {
        ...body,
        accessTokenTtl: body.accessTokenTtl ?? config.tokens.accessTokenTtl,
        rateLimit: body.rateLimit ?? null,
        role: body.role ?? null,
        id: newId(),
        clientId,
        secretHash: secret === null ? null : digestSecret(secret),
      };
      client = await insertClient(db.kysely, record, nowIso());
    } catch (error) {
      if (isUniqueViolation(error)) throw new Error(`a client with client_id ${clientId} already exists`);
      throw error;
    }
    if (options.json) {
      // The shape of POST /v1/clients's 201 body.
      writeJson({ ...viewOf(client), ...(secret === null ? {} : { clientSecret: secret }) });
      return EXIT_OK;
    }
    writeLine(`created ${client.type} client ${client.clientId} (${client.name})`);
    writeLine(`client_id: ${client.clientId}`);
    if (secret !== null) writeLine(`client_secret: ${secret}\n(shown once: only its digest is stored)`);
    return EXIT_OK;
  },
};

const listClientsCommand: Command = {
  name: 'list',
  summary: 'List registered OAuth clients',
  options: { json: JSON_OPTION },
  async run({ options }, { db }) {
    const rows = await db.kysely.selectFrom('clients').selectAll().orderBy('id').execute();
    const clients = rows.map((row) => viewOf(toClientRecord(row)));
    if (options.json) {
      writeJson(clients);
      return EXIT_OK;
    }
    writeTable(
      clients.map((c) => ({
        client_id: c.clientId,
        name: c.name,
        type: c.type,
        role: c.role ?? '-',
        grants: c.grantTypes.join(','),
        scopes: c.scopes.join(' '),
        format: c.accessTokenFormat,
        ttl: String(c.accessTokenTtl),
        id_token_alg: c.idTokenSignedResponseAlg,
        created: c.createdAt,
      })),
      ['client_id', 'name', 'type', 'role', 'grants', 'scopes', 'format', 'ttl', 'id_token_alg', 'created'],
    );
    return EXIT_OK;
  },
};

/** A list of values on one line; `-` when there is none, as for a client without a role. */
function formatList(values: readonly string[], separator = ' '): string {
  return values.length === 0 ? '-' : values.join(separator);
}

const showClientCommand: Command = {
  name: 'show',
  summary: 'Show one OAuth client, its redirect URIs included',
  positionals: ['<client_id>'],
  options: { json: JSON_OPTION },
  async run({ options, positionals }, { db }) {
    const client = viewOf(await findClientOrFail(db.kysely, positionals[0]!));
    if (options.json) {
      writeJson(client);
      return EXIT_OK;
    }
    writeFields([
      ['client_id', client.clientId],
      ['id', client.id],
      ['name', client.name],
      ['type', client.type],
      ['role', client.role ?? '-'],
      ['grants', formatList(client.grantTypes, ',')],
      ['scopes', formatList(client.scopes)],
      ['redirect_uris', formatList(client.redirectUris)],
      ['post_logout_redirect_uris', formatList(client.postLogoutRedirectUris)],
      ['format', client.accessTokenFormat],
      ['ttl', String(client.accessTokenTtl)],
      ['rate_limit', client.rateLimit === null ? '-' : String(client.rateLimit)],
      ['id_token_alg', client.idTokenSignedResponseAlg],
      ['first_party', client.firstParty ? 'yes' : 'no'],
      ['legacy', client.legacy ? 'yes' : 'no'],
      ['created', client.createdAt],
      ['updated', client.updatedAt],
    ]);
    return EXIT_OK;
  },
};

const rotateClientSecretCommand: Command = {
  name: 'rotate-secret',
  summary: 'Give a confidential client a new secret (printed once); the old one stops working',
  positionals: ['<client_id>'],
  options: {
    'revoke-tokens': { type: 'boolean', description: 'also revoke every token issued to the client and to its users (say, after a leak)' },
    json: JSON_OPTION,
  },
  async run({ options, positionals }, { db }) {
    const client = await findClientOrFail(db.kysely, positionals[0]!);
    if (client.type !== 'confidential') throw new Error(`client ${client.clientId} is public: it has no secret to rotate`);
    const secret = generateSecret();
    const now = nowIso();
    const revokeTokens = options['revoke-tokens'] === true;
    await db.kysely.transaction().execute(async (trx) => {
      // A new version, never the one read: a settings change that read it, and a grant in progress that
      // checked the registration, must both find it changed.
      const version = await lockClientVersion(trx, client.id);
      if (version === null) throw new Error(`no client ${client.clientId}`);
      await trx.updateTable('clients').set({ secretHash: digestSecret(secret), updatedAt: nextVersion(version) }).where('id', '=', client.id).execute();
      // Either way running servers read the registration again (the old secret's digest is in what they hold).
      if (revokeTokens) await revokeClientTokens(trx, client.clientId, now);
      else await recordInvalidation(trx, 'client', client.clientId);
    });
    if (options.json) {
      writeJson({ clientId: client.clientId, clientSecret: secret, tokensRevoked: revokeTokens });
      return EXIT_OK;
    }
    writeLine(`client_id: ${client.clientId}`);
    writeLine(`client_secret: ${secret}\n(shown once: only its digest is stored; the previous secret no longer works)`);
    if (revokeTokens) writeLine('every access and refresh token issued to the client so far is revoked');
    return EXIT_OK;
  },
};

const deleteClientCommand: Command = {
  name: 'delete',
  summary: 'Delete a client and revoke its access tokens',
  positionals: ['<client_id>'],
  options: { json: JSON_OPTION },
  async run({ options, positionals }, { db }) {
    const client = await findClientOrFail(db.kysely, positionals[0]!);
    // As DELETE /v1/clients/{id} does: revocation and deletion commit together.
    await db.kysely.transaction().execute(async (trx) => {
      await revokeClientTokens(trx, client.clientId, nowIso());
      await trx.deleteFrom('clients').where('id', '=', client.id).execute();
    });
    if (options.json) {
      writeJson({ clientId: client.clientId, deleted: true });
      return EXIT_OK;
    }
    writeLine(`deleted client ${client.clientId} and revoked its tokens`);
    return EXIT_OK;
  },
};

export const clientsGroup: CommandGroup = {
  name: 'clients',
  summary: 'Manage OAuth client registrations.',
  commands: [createClientCommand, listClientsCommand, showClientCommand, rotateClientSecretCommand, deleteClientCommand],
};
