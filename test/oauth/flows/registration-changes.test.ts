import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { digestSecret } from '../../../src/oauth/secrets.js';
import type { UserRecord } from '../../../src/storage/users.js';
import { DATABASE_KINDS } from '../../helpers/databases.js';
import { createClient, type TestClient } from '../fixtures.js';
import { form, FORM } from '../oauth-app.js';
import { Browser, expectErrorPage, expectPage, hiddenInputs, offeredScopes, pageAlert, pageHeading, type Reply } from './browser.js';
import { authorizeUrl, countRows, createUser, createWebClient, exchangeCode, expectTokenError, obtainCode, openFlowApp, PASSWORD, type FlowApp } from './flow.js';

// An administrator changes or deletes a client while a user is on its login or consent page. The
// interaction was read against the old registration; from the next step on, the current one decides: a
// request it no longer allows ends on an error page — never a redirect to an address that may no longer be
// the client's — and nothing is issued.

const CHANGED = [
  'Application changed',
  'The application that sent you here was changed or removed while you were signing in.',
  'Return to the application and start again.',
] as const;
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const UNKNOWN_CODE = 'That code is not valid or has expired. Check the code on your device.';

describe.each(DATABASE_KINDS)('client registration changed during an interaction, on %s', (kind) => {
  let t: FlowApp;
  let user: UserRecord;

  beforeAll(async () => {
    t = await openFlowApp(kind);
    user = await createUser(t.db);
  });
  afterAll(async () => {
    await t.close();
  });

  type Change = (client: TestClient) => Promise<void>;
  const update = (client: TestClient, values: Record<string, string>) => t.db.kysely.updateTable('clients').set(values).where('id', '=', client.client.id).execute().then(() => undefined);
  const CHANGES: Record<string, Change> = {
    'lost its redirect URI': (client) => update(client, { redirectUris: JSON.stringify(['https://app.example/other']) }),
    'lost the authorization_code grant': (client) => update(client, { grantTypes: JSON.stringify(['client_credentials']), role: 'member' }),
    'lost a requested scope': (client) => update(client, { scopes: JSON.stringify(['openid']) }),
    'was deleted': (client) => t.db.kysely.deleteFrom('clients').where('id', '=', client.client.id).execute().then(() => undefined),
    'was deleted and its client_id registered again': async (client) => {
      await t.db.kysely.deleteFrom('clients').where('id', '=', client.client.id).execute();
      await createWebClient(t.db, { clientId: client.client.clientId });
    },
  };

  /** A fresh browser on the login page of a new authorization request of a new client. */
  async function atLogin(): Promise<{ browser: Browser; client: TestClient; page: Reply }> {
    const client = await createWebClient(t.db);
    const browser = new Browser(t.oauth.app);
    const page = await browser.visit(authorizeUrl(client));
    expectPage(page, 'login');
    return { browser, client, page };
  }

  /** A signed-in browser on the consent page of a new client. */
  async function atConsent(): Promise<{ browser: Browser; client: TestClient; page: Reply }> {
    const { browser, client, page: loginPage } = await atLogin();
    const page = await browser.submit('/oauth/login', { ...hiddenInputs(loginPage.body), email: user.email, password: PASSWORD });
    expectPage(page, 'consent');
    return { browser, client, page };
  }

  for (const [name, change] of Object.entries(CHANGES)) {
    it(`ends the sign-in on an error page when the client ${name} on the login page`, async () => {
      const { browser, client, page } = await atLogin();
      const sessions = await countRows(t.db, 'loginSessions');
      await change(client);
      // Reloading the login page already says so.
      expectErrorPage(await browser.get(`/oauth/login?interaction=${hiddenInputs(page.body).interaction}`), 400, ...CHANGED);
      const codes = await countRows(t.db, 'authorizationCodes');
      const signedIn = await browser.post('/oauth/login', { ...hiddenInputs(page.body), email: user.email, password: PASSWORD });
      expectErrorPage(signedIn, 400, ...CHANGED);
      // The sign-in itself happened (the password was right); nothing for the client did.
      expect(await countRows(t.db, 'loginSessions')).toBe(sessions + 1);
      expect(await countRows(t.db, 'authorizationCodes')).toBe(codes);
    });

    it(`ends the consent on an error page, allowed or denied, when the client ${name} on the consent page`, async () => {
      const { browser, client, page } = await atConsent();
      await change(client);
      const codes = await countRows(t.db, 'authorizationCodes');
      const consents = await countRows(t.db, 'consents');
      const fields = hiddenInputs(page.body);
      for (const decision of ['allow', 'deny']) {
        const answered = await browser.post('/oauth/consent', [['interaction', fields.interaction!], ['csrf_token', fields.csrf_token!], ...offeredScopes(page.body).map((scope): [string, string] => ['scope', scope]), ['decision', decision]]);
        expectErrorPage(answered, 400, ...CHANGED);
      }
      expect(await countRows(t.db, 'authorizationCodes')).toBe(codes);
      expect(await countRows(t.db, 'consents')).toBe(consents);
      // Reloading the consent page shows the same error, not the form.
      expectErrorPage(await browser.get(`/oauth/consent?interaction=${fields.interaction}`), 400, ...CHANGED);
    });
  }

  it('goes on as before when the change still allows the request (another redirect URI added)', async () => {
    const { browser, client, page } = await atConsent();
    await update(client, { redirectUris: JSON.stringify([client.client.redirectUris[0], 'https://app.example/second']) });
    const fields = hiddenInputs(page.body);
    const answered = await browser.post('/oauth/consent', [['interaction', fields.interaction!], ['csrf_token', fields.csrf_token!], ['scope', 'read:posts'], ['decision', 'allow']]);
    expect(answered.statusCode).toBe(303);
    expect(String(answered.headers.location)).toMatch(/^https:\/\/app\.example\/cb\?code=/);
  });

  it('refuses a code issued before its redirect URI was removed', async () => {
    const client = await createWebClient(t.db, { firstParty: true });
    const { code, verifier } = await obtainCode(t, new Browser(t.oauth.app), client, user);
    await update(client, { redirectUris: JSON.stringify(['https://app.example/other']) });
    const tokens = await countRows(t.db, 'accessTokens');
    expectTokenError(await exchangeCode(t, client, code, { code_verifier: verifier }), 400, 'invalid_grant', 'The redirect_uri is no longer registered for this client.');
    expect(await countRows(t.db, 'accessTokens')).toBe(tokens);
  });

  describe('device approvals', () => {
    async function startDevice(): Promise<{ tv: TestClient; userCode: string; deviceCode: string }> {
      const tv = await createClient(t.db, { name: 'Kitchen TV', type: 'public', secretHash: null, grantTypes: [DEVICE_GRANT], scopes: ['read:posts'], role: null });
      const reply = await t.oauth.app.inject({ method: 'POST', url: '/oauth/device_authorization', headers: FORM, payload: form({ client_id: tv.client.clientId, scope: 'read:posts' }) });
      expect(reply.statusCode, reply.body).toBe(200);
      const body = reply.json() as { user_code: string; device_code: string };
      return { tv, userCode: body.user_code, deviceCode: body.device_code };
    }

    async function approvalPage(userCode: string): Promise<{ browser: Browser; page: Reply }> {
      const browser = new Browser(t.oauth.app);
      const login = await browser.visit(`/oauth/device?user_code=${userCode}`);
      const page = await browser.submit('/oauth/login', { ...hiddenInputs(login.body), email: user.email, password: PASSWORD });
      expect(pageHeading(page.body)).toBe('Allow Kitchen TV access?');
      return { browser, page };
    }

    const deviceChanges: Record<string, (tv: TestClient) => Promise<void>> = {
      'was deleted': (tv) => t.db.kysely.deleteFrom('clients').where('id', '=', tv.client.id).execute().then(() => undefined),
      'was deleted and its client_id registered again': async (tv) => {
        await t.db.kysely.deleteFrom('clients').where('id', '=', tv.client.id).execute();
        await createClient(t.db, { clientId: tv.client.clientId, name: 'Kitchen TV', type: 'public', secretHash: null, grantTypes: [DEVICE_GRANT], scopes: ['read:posts'], role: null });
      },
      'lost the device grant': (tv) => update(tv, { grantTypes: JSON.stringify(['client_credentials']), role: 'member' }),
      'lost the scope': (tv) => update(tv, { scopes: JSON.stringify(['write:posts']) }),
    };

    for (const [name, change] of Object.entries(deviceChanges)) {
      it(`approves nothing for a client that ${name} while its approval page was open`, async () => {
        const { tv, userCode, deviceCode } = await startDevice();
        const { browser, page } = await approvalPage(userCode);
        await change(tv);
        const consents = await countRows(t.db, 'consents');
        const answered = await browser.submit('/oauth/device', [...Object.entries(hiddenInputs(page.body)), ['scope', 'read:posts'], ['decision', 'allow']]);
        expect({ status: answered.statusCode, heading: pageHeading(answered.body), alert: pageAlert(answered.body) }).toEqual({ status: 400, heading: 'Connect a device', alert: UNKNOWN_CODE });
        const row = await t.db.kysely.selectFrom('deviceCodes').select(['status', 'userId']).where('deviceCodeHash', '=', digestSecret(deviceCode)).executeTakeFirstOrThrow();
        expect(row).toEqual({ status: 'pending', userId: null });
        expect(await countRows(t.db, 'consents')).toBe(consents);
        // Opening the code again shows no approval page either.
        const again = await browser.visit(`/oauth/device?user_code=${userCode}`);
        expect({ status: again.statusCode, alert: pageAlert(again.body) }).toEqual({ status: 400, alert: UNKNOWN_CODE });
      });
    }
  });
});
