import type { components } from '../../generated/openapi.js';
import { CLIENT_COLUMNS, toClientRecord } from '../storage/clients.js';
import { defineResource } from './resource-module.js';

export type ClientView = components['schemas']['Client'];

/** OAuth client registrations: read without the secret's digest, JSON columns decoded. */
export const clients = defineResource<ClientView>({
  type: 'client',
  table: { name: 'clients', columns: CLIENT_COLUMNS },
  fromRow: (row) => {
    const { secretHash: _digest, ...client } = toClientRecord({ ...row, secretHash: null } as never);
    return { ...client };
  },
});
