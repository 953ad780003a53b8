import type { Kysely, Migration } from 'kysely';
import type { DialectName } from '../dialect.js';

/** One migration set for both dialects: only portable column types (text, integer, boolean). */
export const initial = (dialect: DialectName): Migration => ({
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('users')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('email', 'text', (c) => c.notNull().unique())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('role', 'text', (c) => c.notNull())
      .addColumn('active', 'boolean', (c) => c.notNull())
      .addColumn('password_hash', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('users_role_idx').on('users').columns(['role', 'id']).execute();

    await db.schema
      .createTable('posts')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('author_id', 'text', (c) => c.notNull())
      .addColumn('title', 'text', (c) => c.notNull())
      .addColumn('body', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('posts_author_idx').on('posts').columns(['author_id', 'id']).execute();
    await db.schema.createIndex('posts_status_idx').on('posts').columns(['status', 'id']).execute();

    await db.schema
      .createTable('comments')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('post_id', 'text', (c) => c.notNull().references('posts.id').onDelete('cascade'))
      .addColumn('author_id', 'text', (c) => c.notNull())
      .addColumn('body', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('comments_post_idx').on('comments').columns(['post_id', 'id']).execute();

    await db.schema
      .createTable('clients')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('client_id', 'text', (c) => c.notNull().unique())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('type', 'text', (c) => c.notNull())
      .addColumn('secret_hash', 'text')
      .addColumn('redirect_uris', 'text', (c) => c.notNull())
      .addColumn('grant_types', 'text', (c) => c.notNull())
      .addColumn('scopes', 'text', (c) => c.notNull())
      .addColumn('role', 'text', (c) => c.notNull())
      .addColumn('access_token_format', 'text', (c) => c.notNull())
      .addColumn('access_token_ttl', 'integer', (c) => c.notNull())
      .addColumn('first_party', 'boolean', (c) => c.notNull())
      .addColumn('legacy', 'boolean', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();

    await db.schema
      .createTable('signing_keys')
      .addColumn('kid', 'text', (c) => c.primaryKey())
      .addColumn('alg', 'text', (c) => c.notNull())
      .addColumn('public_jwk', 'text', (c) => c.notNull())
      .addColumn('private_jwk_encrypted', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('retired_at', 'text')
      .execute();

    await db.schema
      .createTable('access_tokens')
      .addColumn('jti', 'text', (c) => c.primaryKey())
      .addColumn('token_hash', 'text', (c) => c.unique())
      .addColumn('format', 'text', (c) => c.notNull())
      .addColumn('client_id', 'text', (c) => c.notNull())
      .addColumn('subject', 'text', (c) => c.notNull())
      .addColumn('subject_type', 'text', (c) => c.notNull())
      .addColumn('scopes', 'text', (c) => c.notNull())
      .addColumn('grant_type', 'text', (c) => c.notNull())
      .addColumn('issued_at', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'text', (c) => c.notNull())
      .addColumn('revoked_at', 'text')
      .execute();
    await db.schema.createIndex('access_tokens_expiry_idx').on('access_tokens').column('expires_at').execute();

    await db.schema
      .createTable('audit_events')
      .addColumn('seq', dialect === 'postgres' ? 'bigserial' : 'integer', (c) =>
        dialect === 'postgres' ? c.primaryKey() : c.primaryKey().autoIncrement(),
      )
      .addColumn('id', 'text', (c) => c.notNull().unique())
      .addColumn('time', 'text', (c) => c.notNull())
      .addColumn('request_id', 'text')
      .addColumn('subject', 'text')
      .addColumn('client_id', 'text')
      .addColumn('interface', 'text', (c) => c.notNull())
      .addColumn('operation', 'text', (c) => c.notNull())
      .addColumn('resource_type', 'text')
      .addColumn('resource_id', 'text')
      .addColumn('decision', 'text', (c) => c.notNull())
      .addColumn('reason', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('audit_events_time_idx').on('audit_events').column('time').execute();
  },
});
