import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RegisteredClients } from '../../src/oauth/registered-clients.js';
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from '../helpers/databases.js';
import { createClient, type TestClient } from './fixtures.js';

describe.each(DATABASE_KINDS)('client registrations held in memory on %s', (kind) => {
  let t: TestDatabase;
  let service: TestClient;
  let now: number;
  let clients: RegisteredClients;

  beforeEach(async () => {
    t = await createTestDatabase(kind);
    service = await createClient(t.db);
    now = Date.now();
    clients = new RegisteredClients(t.db.kysely, { ttlMs: 30_000, maxEntries: 2, clock: () => now });
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await t.drop();
  });

  const clientId = () => service.client.clientId;
  const deleteRow = () => t.db.kysely.deleteFrom('clients').where('clientId', '=', clientId()).execute();

  it('reads a registration once and answers from memory until it is forgotten', async () => {
    const reads = vi.spyOn(t.db.kysely, 'selectFrom');
    const first = await clients.find(clientId());
    expect(first).toMatchObject({ id: service.client.id, clientId: clientId(), secretHash: expect.any(String), scopes: ['read:posts', 'write:posts'] });
    expect(Object.isFrozen(first)).toBe(true);
    expect(Object.isFrozen(first!.scopes)).toBe(true);
    expect(await clients.find(clientId())).toBe(first);
    expect(reads).toHaveBeenCalledTimes(1);
    // Deleted behind its back (no invalidation): still held, which is why every change records one.
    await deleteRow();
    expect(await clients.find(clientId())).toBe(first);
    clients.forget(clientId());
    expect(await clients.find(clientId())).toBeNull();
  });

  it('shares one read among concurrent lookups of the same client_id', async () => {
    const reads = vi.spyOn(t.db.kysely, 'selectFrom');
    const found = await Promise.all([clients.find(clientId()), clients.find(clientId()), clients.find(clientId())]);
    expect(new Set(found).size).toBe(1);
    expect(reads).toHaveBeenCalledTimes(1);
  });

  it('does not keep what a read saw when the registration was forgotten while the read was under way', async () => {
    const reading = clients.find(clientId());
    clients.forget(clientId());
    await deleteRow();
    expect(await reading).toMatchObject({ clientId: clientId() });
    expect(await clients.find(clientId())).toBeNull();
    expect(clients.size).toBe(0);
  });

  it('holds no unknown client_id, and reads each registration again after its time to live', async () => {
    expect(await clients.find('no-such-client')).toBeNull();
    expect(clients.size).toBe(0);
    await clients.find(clientId());
    await deleteRow();
    now += 29_999;
    expect(await clients.find(clientId())).toMatchObject({ clientId: clientId() });
    now += 1;
    expect(await clients.find(clientId())).toBeNull();
  });

  it('holds at most maxEntries, dropping the least recently read; clear drops every one', async () => {
    const others = [await createClient(t.db), await createClient(t.db)];
    for (const { client } of [service, ...others]) await clients.find(client.clientId);
    expect(clients.size).toBe(2);
    const reads = vi.spyOn(t.db.kysely, 'selectFrom');
    await clients.find(others[1]!.client.clientId);
    expect(reads).not.toHaveBeenCalled();
    await clients.find(clientId());
    expect(reads).toHaveBeenCalledTimes(1);
    clients.clear();
    expect(clients.size).toBe(0);
  });

  it('tells a client_id registered again from the registration it replaced', async () => {
    const old = await clients.find(clientId());
    await deleteRow();
    const again = await createClient(t.db, { clientId: clientId() });
    clients.forget(clientId());
    const current = await clients.find(clientId());
    expect(current!.id).toBe(again.client.id);
    expect(current!.id).not.toBe(old!.id);
    expect(current!.secretHash).not.toBe(old!.secretHash);
  });
});
