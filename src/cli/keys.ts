import { KeyStore } from '../oauth/keys/key-store.js';
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
      .select(['kid', 'alg', 'createdAt', 'retiredAt'])
      .orderBy('createdAt', 'desc')
      .orderBy('kid', 'desc')
      .execute();
    if (options.json) {
      writeJson(keys.map((k) => ({ kid: k.kid, alg: k.alg, created: k.createdAt, retired: k.retiredAt })));
      return EXIT_OK;
    }
    writeTable(
      keys.map((k) => ({ kid: k.kid, alg: k.alg, created: k.createdAt, retired: k.retiredAt ?? '-' })),
      ['kid', 'alg', 'created', 'retired'],
    );
    return EXIT_OK;
  },
};

const rotateKeysCommand: Command = {
  name: 'rotate',
  summary: 'Create a new signing key; the old one stays published until its tokens expire',
  options: { json: JSON_OPTION },
  async run({ options }, { db, config }) {
    // KeyStore.open creates the first key when there is none, so rotating a fresh database still leaves
    // a retired key and a signing key, exactly as on a running system.
    const store = await KeyStore.open(db, config);
    const kid = await store.rotate();
    if (options.json) writeJson({ kid });
    // Servers re-read the key table at least once a minute (key-store.ts) and then sign with the new key.
    else writeLine(`new signing key ${kid}; servers switch to it within a minute`);
    return EXIT_OK;
  },
};

export const keysGroup: CommandGroup = {
  name: 'keys',
  summary: 'Manage the ES256 keys that sign access and ID tokens.',
  commands: [listKeysCommand, rotateKeysCommand],
};
