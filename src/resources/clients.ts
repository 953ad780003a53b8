import type { components } from '../../generated/openapi.js';
import { CLIENT_COLUMNS, toClientRecord } from '../storage/clients.js';
import { defineResource } from './resource-module.js';

export type ClientView = components['schemas']['Client'];

/** OAuth client registrations: read without the secret's digest or the revocation count, JSON columns decoded. */
export const clients = defineResource<ClientView>({
  type: 'client',
  table: { name: 'clients', columns: CLIENT_COLUMNS },
  fromRow: (row) => {
    const { secretHash: _digest, revocations: _revocations, ...client } = toClientRecord({ ...row, secretHash: null, revocations: 0 } as never);
    return { ...client };
  },
});
