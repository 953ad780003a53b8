import { ConfigError } from '../config/config.js';
import { encryptionKeysFrom } from '../oauth/keys/key-encryption.js';
import { KeyStore, PUBLISH_AHEAD_SECONDS } from '../oauth/keys/key-store.js';
import { rewrapStoredKeys } from '../oauth/keys/rewrap-keys.js';
import { EXIT_OK } from './cli-errors.js';
import { JSON_OPTION, type Command, type CommandGroup } from './command.js';
import { formatCount, writeJson, writeLine, writeTable } from './output.js';

const listKeysCommand: Command = {
  name: 'list',
  summary: 'List signing keys, newest first (public facts only)',
  options: { json: JSON_OPTION },
  async run({ options }, { db }) {
    // Only these columns are read: the encrypted private part never leaves the database.
    const keys = await db.kysely
      .selectFrom('signingKeys')
      .select(['kid', 'alg', 'createdAt', 'activatesAt', 'retiredAt'])
      .orderBy('activatesAt', 'desc')
      .orderBy('generation', 'desc')
      .orderBy('kid', 'desc')
      .execute();
    if (options.json) {
      writeJson(keys.map((k) => ({ kid: k.kid, alg: k.alg, created: k.createdAt, activates: k.activatesAt, retired: k.retiredAt })));
      return EXIT_OK;
    }
    writeTable(
      keys.map((k) => ({ kid: k.kid, alg: k.alg, created: k.createdAt, activates: k.activatesAt, retired: k.retiredAt ?? '-' })),
      ['kid', 'alg', 'created', 'activates', 'retired'],
    );
    return EXIT_OK;
  },
};

const rotateKeysCommand: Command = {
  name: 'rotate',
  summary: `Create new signing keys (ES256 and RS256), published at once, signing in ${PUBLISH_AHEAD_SECONDS / 60} minutes; the old ones stay published until their tokens expire`,
  options: { json: JSON_OPTION },
  async run({ options }, { db, config }) {
    // KeyStore.open creates the first keys when there are none, so rotating a fresh database still leaves
    // retired keys and signing keys, exactly as on a running system.
    const store = await KeyStore.open(db, config);
    const rotation = await store.rotate();
    if (options.json) writeJson(rotation);
    else {
      writeLine(
        `new signing key ${rotation.kid} (ES256, access tokens) and ${rotation.idTokenKid} (RS256, ID tokens), published now; every server signs with them from ${rotation.activatesAt}`,
      );
    }
    return EXIT_OK;
  },
};

const rewrapKeysCommand: Command = {
  name: 'rewrap',
  summary: 'Re-encrypt every stored private key from PREVIOUS_KEY_ENCRYPTION_SECRET to KEY_ENCRYPTION_SECRET, in one transaction',
  options: { json: JSON_OPTION },
  async run({ options }, { db, config }) {
    // Both secrets come from the environment, like every setting: never from the command line, which `ps` shows.
    const problems: string[] = [];
    if (config.previousKeyEncryptionSecret === null) {
      problems.push('PREVIOUS_KEY_ENCRYPTION_SECRET: keys rewrap needs the secret the keys are encrypted under now');
    }
    if (config.developmentDefaults.includes('KEY_ENCRYPTION_SECRET')) {
      problems.push('KEY_ENCRYPTION_SECRET: is not set; keys rewrap re-encrypts under it and will not use the development default');
    }
    if (problems.length > 0) throw new ConfigError(problems);
    const { current, previous } = encryptionKeysFrom(config);
    const result = await rewrapStoredKeys(db.kysely, { current, previous: previous! });
    if (options.json) {
      writeJson(result);
      return EXIT_OK;
    }
    const rewrapped = result.signingKeys + result.auditKeys;
    writeLine(
      rewrapped === 0
        ? `nothing to re-encrypt: ${formatCount(result.alreadyCurrent, 'key')} already under KEY_ENCRYPTION_SECRET`
        : `re-encrypted ${formatCount(result.signingKeys, 'signing key')} and ${formatCount(result.auditKeys, 'audit key')} under KEY_ENCRYPTION_SECRET` +
            (result.alreadyCurrent > 0 ? ` (${formatCount(result.alreadyCurrent, 'key')} already under it)` : ''),
    );
    if (result.unreadableAuditKeys.length > 0) {
      writeLine(`left ${formatCount(result.unreadableAuditKeys.length, 'audit key row')} neither secret decrypts, which never signs: ${result.unreadableAuditKeys.join(', ')}`);
    }
    return EXIT_OK;
  },
};

export const keysGroup: CommandGroup = {
  name: 'keys',
  summary: 'Manage the keys that sign access tokens (ES256) and ID tokens (RS256, or ES256 if a client asks), and the secret their private parts are encrypted under.',
  commands: [listKeysCommand, rotateKeysCommand, rewrapKeysCommand],
};
