import { KeyStore, PUBLISH_AHEAD_SECONDS } from '../oauth/keys/key-store.js';
import { EXIT_OK } from './cli-errors.js';
import { JSON_OPTION, type Command, type CommandGroup } from './command.js';
import { writeJson, writeLine, writeTable } from './output.js';

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

export const keysGroup: CommandGroup = {
  name: 'keys',
  summary: 'Manage the keys that sign access tokens (ES256) and ID tokens (RS256, or ES256 if a client asks).',
  commands: [listKeysCommand, rotateKeysCommand],
};
