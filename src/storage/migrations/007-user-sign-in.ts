import { sql, type Kysely, type Migration } from 'kysely';
import type { DialectName } from '../dialect.js';

/**
 * Users sign in (the authorization server's user-facing grants and pages):
 * - `clients`: `role` becomes optional (it matters only to a client that acts on its own behalf through
 *   client credentials); `post_logout_redirect_uris` (OpenID Connect RP-initiated logout) and
 *   `id_token_signed_response_alg` (RS256 unless the client registers ES256);
 * - `access_tokens.grant_id`: the user's grant a token came from (one code exchange, one device
 *   approval, one refresh family), so a replayed code or a reused refresh token ends all of it at once;
 * - `login_sessions`: a browser's sign-in, found by the SHA-256 digest of its cookie;
 * - `interactions`: an authorization or device request while the user signs in and consents, kept here
 *   rather than in memory so it survives a restart and works across instances;
 * - `consents`: what a user allowed a client registration, per scope set;
 * - `authorization_codes`, `refresh_tokens`, `device_codes`: the grants' own records, secrets as digests;
 * - `audit_events.scopes`: the scopes a consent, code or token decision was about (covered by the chain
 *   hash when present, so events written before stay verifiable).
 */
export const userSignIn = (dialect: DialectName): Migration => ({
  async up(db: Kysely<unknown>) {
    if (dialect === 'postgres') {
      await sql`alter table clients alter column role drop not null`.execute(db);
    } else {
      // SQLite cannot drop a NOT NULL constraint in place: the table is rebuilt with the same rows.
      await db.schema
        .createTable('clients_new')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('client_id', 'text', (c) => c.notNull().unique())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('secret_hash', 'text')
        .addColumn('redirect_uris', 'text', (c) => c.notNull())
        .addColumn('grant_types', 'text', (c) => c.notNull())
        .addColumn('scopes', 'text', (c) => c.notNull())
        .addColumn('role', 'text')
        .addColumn('access_token_format', 'text', (c) => c.notNull())
        .addColumn('access_token_ttl', 'integer', (c) => c.notNull())
        .addColumn('first_party', 'boolean', (c) => c.notNull())
        .addColumn('legacy', 'boolean', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await sql`insert into clients_new select * from clients`.execute(db);
      await db.schema.dropTable('clients').execute();
      await db.schema.alterTable('clients_new').renameTo('clients').execute();
    }
    await db.schema.alterTable('clients').addColumn('post_logout_redirect_uris', 'text', (c) => c.notNull().defaultTo('[]')).execute();
    await db.schema.alterTable('clients').addColumn('id_token_signed_response_alg', 'text', (c) => c.notNull().defaultTo('RS256')).execute();

    await db.schema.alterTable('audit_events').addColumn('scopes', 'text').execute();

    await db.schema.alterTable('access_tokens').addColumn('grant_id', 'text').execute();
    await db.schema.createIndex('access_tokens_grant_idx').on('access_tokens').column('grant_id').execute();
    await db.schema.createIndex('access_tokens_subject_idx').on('access_tokens').columns(['subject', 'subject_type']).execute();

    await db.schema
      .createTable('login_sessions')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('user_id', 'text', (c) => c.notNull())
      .addColumn('auth_time', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'text', (c) => c.notNull())
      .addColumn('revoked_at', 'text')
      .execute();
    await db.schema.createIndex('login_sessions_user_idx').on('login_sessions').column('user_id').execute();
    await db.schema.createIndex('login_sessions_expiry_idx').on('login_sessions').column('expires_at').execute();

    await db.schema
      .createTable('interactions')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('browser_hash', 'text', (c) => c.notNull())
      .addColumn('kind', 'text', (c) => c.notNull())
      .addColumn('params', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'text', (c) => c.notNull())
      .addColumn('completed_at', 'text')
      .execute();
    await db.schema.createIndex('interactions_expiry_idx').on('interactions').column('expires_at').execute();

    await db.schema
      .createTable('consents')
      .addColumn('user_id', 'text', (c) => c.notNull())
      .addColumn('client_registration_id', 'text', (c) => c.notNull())
      .addColumn('client_id', 'text', (c) => c.notNull())
      .addColumn('scopes', 'text', (c) => c.notNull())
      .addColumn('granted_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('consents_pk', ['user_id', 'client_registration_id'])
      .execute();

    await db.schema
      .createTable('authorization_codes')
      .addColumn('code_hash', 'text', (c) => c.primaryKey())
      .addColumn('grant_id', 'text', (c) => c.notNull())
      .addColumn('client_id', 'text', (c) => c.notNull())
      .addColumn('client_registration_id', 'text', (c) => c.notNull())
      .addColumn('user_id', 'text', (c) => c.notNull())
      .addColumn('redirect_uri', 'text', (c) => c.notNull())
      .addColumn('code_challenge', 'text')
      .addColumn('scopes', 'text', (c) => c.notNull())
      .addColumn('nonce', 'text')
      .addColumn('auth_time', 'text', (c) => c.notNull())
      .addColumn('issued_at', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'text', (c) => c.notNull())
      .addColumn('redeemed_at', 'text')
      .execute();
    await db.schema.createIndex('authorization_codes_expiry_idx').on('authorization_codes').column('expires_at').execute();

    await db.schema
      .createTable('refresh_tokens')
      .addColumn('token_hash', 'text', (c) => c.primaryKey())
      .addColumn('family_id', 'text', (c) => c.notNull())
      .addColumn('client_id', 'text', (c) => c.notNull())
      .addColumn('client_registration_id', 'text', (c) => c.notNull())
      .addColumn('user_id', 'text', (c) => c.notNull())
      .addColumn('scopes', 'text', (c) => c.notNull())
      .addColumn('auth_time', 'text', (c) => c.notNull())
      .addColumn('issued_at', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'text', (c) => c.notNull())
      .addColumn('rotated_at', 'text')
      .addColumn('revoked_at', 'text')
      .execute();
    await db.schema.createIndex('refresh_tokens_family_idx').on('refresh_tokens').column('family_id').execute();
    await db.schema.createIndex('refresh_tokens_user_idx').on('refresh_tokens').columns(['user_id', 'client_registration_id']).execute();
    await db.schema.createIndex('refresh_tokens_expiry_idx').on('refresh_tokens').column('expires_at').execute();

    await db.schema
      .createTable('device_codes')
      .addColumn('device_code_hash', 'text', (c) => c.primaryKey())
      .addColumn('user_code', 'text', (c) => c.notNull().unique())
      .addColumn('grant_id', 'text', (c) => c.notNull())
      .addColumn('client_id', 'text', (c) => c.notNull())
      .addColumn('client_registration_id', 'text', (c) => c.notNull())
      .addColumn('scopes', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('user_id', 'text')
      .addColumn('auth_time', 'text')
      .addColumn('interval_seconds', 'integer', (c) => c.notNull())
      .addColumn('last_polled_at', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('device_codes_expiry_idx').on('device_codes').column('expires_at').execute();
  },
});
