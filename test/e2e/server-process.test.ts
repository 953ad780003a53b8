import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { bootstrapAdminToken, startServer, waitUntilLive } from '../helpers/server-process.js';

describe('server process', () => {
  it('bootstraps on first start: bootstrap.json (0600) whose admin client gets a working token', async () => {
    const server = await startServer();
    await waitUntilLive(server);
    const file = path.join(server.dataDir, 'bootstrap.json');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    // So is the database, and the files SQLite keeps beside it.
    for (const name of ['portcullis.db', 'portcullis.db-wal', 'portcullis.db-shm']) {
      expect({ name, mode: fs.statSync(path.join(server.dataDir, name)).mode & 0o777 }).toEqual({ name, mode: 0o600 });
    }
    const bootstrap = JSON.parse(fs.readFileSync(file, 'utf8'));
    expect(bootstrap).toEqual({
      issuer: server.base,
      admin: { email: expect.any(String), password: expect.any(String) },
      clients: { admin: { client_id: expect.any(String), client_secret: expect.any(String) } },
    });
    expect(bootstrap.admin.password.length).toBeGreaterThanOrEqual(12);
    // The development defaults in use are named at start-up, the issuer with the URL it chose.
    const warnings = server
      .output()
      .split('\n')
      .filter((line) => line.includes('"level":40'))
      .map((line) => JSON.parse(line).msg);
    expect(warnings).toEqual([
      `ISSUER is not set: using ${server.base}, development only; set ISSUER to the URL clients use`,
      'KEY_ENCRYPTION_SECRET is not set: using a development-only default (refused when NODE_ENV=production)',
    ]);

    const tokenResponse = await fetch(`${server.base}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${bootstrap.clients.admin.client_id}:${bootstrap.clients.admin.client_secret}`).toString('base64')}`,
      },
      body: 'grant_type=client_credentials',
    });
    expect(tokenResponse.status).toBe(200);
    const { access_token: token } = (await tokenResponse.json()) as { access_token: string };
    const clients = await fetch(`${server.base}/v1/clients`, { headers: { authorization: `Bearer ${token}` } });
    const { data } = (await clients.json()) as { data: { id: string; clientId: string }[] };
    const registration = data.find((c) => c.clientId === bootstrap.clients.admin.client_id)!;
    const me = await fetch(`${server.base}/v1/authorization`, { headers: { authorization: `Bearer ${token}` } });
    expect(me.status).toBe(200);
    expect(((await me.json()) as { principal: unknown }).principal).toEqual({
      type: 'client',
      id: registration.id,
      clientId: bootstrap.clients.admin.client_id,
      role: 'admin',
    });
    expect((await fetch(`${server.base}/readyz`)).status).toBe(200);
    // Every decision is a structured log line for a log pipeline to ship (written once the response is sent)...
    for (let i = 0; i < 50 && !server.output().includes('"operation":"getAuthorization"'); i++) await new Promise((r) => setTimeout(r, 50));
    const decisions = server
      .output()
      .split('\n')
      .filter((line) => line.includes('"msg":"access.decided"'))
      .map((line) => JSON.parse(line).audit);
    expect(decisions).toContainEqual(
      expect.objectContaining({ operation: 'getAuthorization', decision: 'allow', reason: 'authenticated', subject: bootstrap.clients.admin.client_id }),
    );
    // ...and secrets never reach the log.
    expect(server.output()).not.toContain(bootstrap.clients.admin.client_secret);
    expect(server.output()).not.toContain(bootstrap.admin.password);
    expect(server.output()).not.toContain(token);
  });

  it('refuses to start with invalid configuration, listing every problem', async () => {
    const server = await startServer({ ACCESS_TOKEN_TTL: '60', RATE_LIMIT_MAX: 'lots', TRUST_PROXY: 'true', SIGNING_KEY_ROTATION_DAYS: '400' });
    expect(await server.exited).toBe(78);
    expect(server.output()).toContain('ACCESS_TOKEN_TTL: must be between 300 and 3600, got 60');
    expect(server.output()).toContain('SIGNING_KEY_ROTATION_DAYS: must be between 0 and 365, got 400');
    expect(server.output()).toContain('RATE_LIMIT_MAX: must be an integer, got "lots"');
    expect(server.output()).toContain('TRUST_PROXY: true would trust every X-Forwarded-For entry, which any client can forge');
  });

  it("refuses a MAX_TOKEN_LENGTH shorter than the tokens it would issue, naming the least it takes, and starts with that", async () => {
    const issuer = 'https://api.example.test';
    const refused = await startServer({ ISSUER: issuer, MAX_TOKEN_LENGTH: '512' });
    expect(await refused.exited).toBe(78);
    const problem = /MAX_TOKEN_LENGTH must be at least (\d+): this server's access tokens \(this ISSUER, the contract's scopes, client ids of up to 128 characters\) can be that long; got 512/.exec(
      refused.output(),
    );
    expect(problem, refused.output()).not.toBeNull();
    // Refused before anything was written: no database, no bootstrap secrets.
    expect(fs.readdirSync(refused.dataDir)).toEqual([]);
    const least = problem![1]!;
    expect(Number(least)).toBeGreaterThan(512);
    // At exactly that length it starts, and the admin client's token (every scope the client holds) is accepted.
    const server = await startServer({ ISSUER: issuer, MAX_TOKEN_LENGTH: least }, refused.dataDir);
    await waitUntilLive(server);
    const token = await bootstrapAdminToken(server);
    expect(token.length).toBeLessThanOrEqual(Number(least));
    expect((await fetch(`${server.base}/v1/authorization`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
  });

  it('names the port in one line and exits 1 when the port is in use', async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    try {
      const port = (holder.address() as net.AddressInfo).port;
      const server = await startServer({ PORT: String(port) });
      expect(await server.exited).toBe(1);
      const errors = server
        .output()
        .split('\n')
        .filter((line) => line !== '' && !line.startsWith('{'));
      expect(errors).toEqual([`portcullis: cannot listen on 127.0.0.1:${port}: port ${port} is already in use; stop what holds it or set PORT to a free port`]);
      expect(server.output()).not.toContain('    at ');
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });

  it('stops with exit 78 and one line when KEY_ENCRYPTION_SECRET is not the one its keys were stored with', async () => {
    const first = await startServer({ KEY_ENCRYPTION_SECRET: 'the-secret-the-keys-were-stored-with-0123456789' });
    await waitUntilLive(first);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const wrong = await startServer({ KEY_ENCRYPTION_SECRET: 'another-secret-that-opens-nothing-0123456789' }, first.dataDir);
    expect(await wrong.exited).toBe(78);
    expect(wrong.output()).toMatch(/^portcullis: The private part of signing key \S+ cannot be decrypted: is KEY_ENCRYPTION_SECRET the one it was stored with\? \(To change it, set the old one in PREVIOUS_KEY_ENCRYPTION_SECRET and run "keys rewrap"; see the README\.\)$/m);
    expect(wrong.output()).not.toContain('    at ');
  });

  it('stops with exit 1 and one line, changing nothing, on a database a newer version migrated', async () => {
    const first = await startServer();
    await waitUntilLive(first);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    // What a newer version leaves behind when it is rolled back: a migration this one does not have.
    const file = path.join(first.dataDir, 'portcullis.db');
    const sqlite = new Database(file);
    sqlite.prepare('insert into kysely_migration (name, timestamp) values (?, ?)').run('999-from-the-future', new Date().toISOString());
    const applied = () => sqlite.prepare('select name from kysely_migration order by name').pluck().all();
    const before = applied();
    const older = await startServer({}, first.dataDir);
    expect(await older.exited).toBe(1);
    const errors = older
      .output()
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('{'));
    expect(errors).toEqual([
      'portcullis: The database has applied migrations this version does not know (999-from-the-future): a newer version of the server, ' +
        'or a contract with more resource types, migrated it. Run that version, or restore a backup taken before it migrated.',
    ]);
    expect(applied()).toEqual(before);
    sqlite.close();
  });

  it('refuses development defaults under NODE_ENV=production', async () => {
    const server = await startServer({ NODE_ENV: 'production' });
    expect(await server.exited).toBe(78);
    expect(server.output()).toContain('production refuses development defaults; set ISSUER, KEY_ENCRYPTION_SECRET');
  });

  it('drains in-flight requests on SIGTERM, exits 0 and loses no audit event', async () => {
    const server = await startServer({ LOG_LEVEL: 'warn', RATE_LIMIT_ANONYMOUS_MAX: '100000', RATE_LIMIT_ADDRESS_MAX: '100000' });
    await waitUntilLive(server);
    const requests = Array.from({ length: 40 }, () =>
      fetch(`${server.base}/v1/rest`).then(
        async (res) => ({ status: res.status, complete: (await res.text()).length > 0 }),
        () => null,
      ),
    );
    await new Promise((r) => setTimeout(r, 20));
    server.child.kill('SIGTERM');
    const results = await Promise.all(requests);
    expect(await server.exited).toBe(0);
    const answered = results.filter((r) => r !== null);
    // Every request the server accepted got a whole answer: served, or refused as unavailable while closing.
    for (const r of answered) {
      expect([200, 503]).toContain(r!.status);
      expect(r!.complete).toBe(true);
    }
    const served = answered.filter((r) => r!.status === 200).length;
    expect(served).toBeGreaterThan(0);
    const db = new Database(path.join(server.dataDir, 'portcullis.db'), { readonly: true });
    const { count } = db.prepare("select count(*) as count from audit_events where operation = 'getRestContract'").get() as { count: number };
    db.close();
    expect(count).toBe(served);
  });
});
