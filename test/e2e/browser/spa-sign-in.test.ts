import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACTION_TIMEOUT_MS, BROWSER_TEST_TIMEOUT_MS, CHROMIUM_AVAILABLE, launchChromium } from './chromium.js';
import { EXAMPLE_APP_SCOPE as SCOPE, startExampleApp, type ExampleApp } from './example-app.js';
import { explainFailure, signIn, tokenResponse, watchConsole } from './pages.js';

// A single-page app on its own https origin (another port of 127.0.0.1) as a public client, driven in Chromium:
// it signs in with code + PKCE, calls the API cross-origin with a token it keeps in memory only, renews
// with prompt=none without showing a page, and signs out through the end_session_endpoint.

const TOKEN_RESPONSE = { access_token: expect.any(String), token_type: 'Bearer', expires_in: 600, scope: SCOPE, id_token: expect.any(String) };

interface StorageWrite {
  key: string;
  value: string;
}

/** A fresh browser profile that reports every write to Web Storage, from any page or frame. */
async function recordingContext(browser: Browser): Promise<{ context: BrowserContext; storageWrites: StorageWrite[] }> {
  const context = await browser.newContext();
  context.setDefaultTimeout(ACTION_TIMEOUT_MS);
  const storageWrites: StorageWrite[] = [];
  await context.exposeFunction('recordStorageWrite', (key: string, value: string) => storageWrites.push({ key, value }));
  await context.addInitScript(() => {
    const setItem = Storage.prototype.setItem;
    Storage.prototype.setItem = function (key: string, value: string) {
      (window as unknown as { recordStorageWrite(key: string, value: string): void }).recordStorageWrite(key, value);
      setItem.call(this, key, value);
    };
  });
  return { context, storageWrites };
}

function webStorage(page: Page) {
  return page.evaluate(() => ({ local: { ...localStorage }, session: { ...sessionStorage } }));
}

describe.skipIf(!CHROMIUM_AVAILABLE)('a single-page app in Chromium', () => {
  let app: ExampleApp;
  let browser: Browser;

  beforeAll(async () => {
    app = await startExampleApp();
    browser = await launchChromium();
  }, BROWSER_TEST_TIMEOUT_MS);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  it(
    'signs in with PKCE, keeps the token in memory, calls the API, renews silently, signs out',
    async () => {
      const { spa, server, clientId } = app;
      const user = await server.createUser();
      const { context, storageWrites } = await recordingContext(browser);
      try {
        const page = await context.newPage();
        const problems = watchConsole(page);
        let tokenRequests = 0;
        page.on('request', (request) => {
          if (request.url() === `${server.issuer}/oauth/token`) tokenRequests++;
        });
        const status = () => page.locator('#status').textContent();
        const apiResult = async () => JSON.parse((await page.locator('#api-result').textContent()) || 'null') as unknown;

        await page.goto(`${spa.origin}/`);
        await expect.poll(status).toBe('Signed out');

        // The login page loads without a console error under its CSP; signIn finds the fields by their labels.
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.waitForURL(`${server.issuer}/oauth/login?**`);
        expect(problems).toEqual([]);
        await signIn(page, user);
        await page.getByRole('heading', { name: 'Allow Example app access?' }).waitFor();
        const first = await tokenResponse(page, server.issuer, () => page.getByRole('button', { name: 'Allow' }).click());
        expect(first).toEqual(TOKEN_RESPONSE);
        expect(first).not.toHaveProperty('refresh_token');
        await expect.poll(status).toBe(`Signed in as ${user.id}`);
        expect(await page.locator('#token').textContent()).toBe(`Access token 1, scope: ${SCOPE}`);
        // The app replaced the callback's history entry: neither the code nor the state stays in the URL.
        expect(page.url()).toBe(`${spa.origin}/`);
        expect(await webStorage(page)).toEqual({ local: {}, session: {} });

        // The API, cross-origin, with the bearer token from memory.
        const authorization = {
          status: 200,
          body: {
            principal: { type: 'user', id: user.id, clientId, role: 'member' },
            roles: ['member'],
            permissions: expect.arrayContaining(['read_post', 'create_post']),
            scopes: SCOPE.split(' '),
            effectivePermissions: ['read_post'],
          },
        };
        await page.getByRole('button', { name: 'Call the API' }).click();
        await expect.poll(apiResult).toEqual(authorization);

        // Silent renewal: the only document loaded on the way is the app's silent callback, in its iframe.
        const documents: string[] = [];
        page.on('framenavigated', (frame) => documents.push(frame.url()));
        const renewed = await tokenResponse(page, server.issuer, () => page.getByRole('button', { name: 'Renew silently' }).click());
        expect(renewed).toEqual(TOKEN_RESPONSE);
        expect(renewed).not.toHaveProperty('refresh_token');
        expect(renewed.access_token).not.toBe(first.access_token);
        await expect.poll(() => page.locator('#token').textContent()).toBe(`Access token 2, scope: ${SCOPE}`);
        expect(documents).toEqual([expect.stringMatching(new RegExp(`^${spa.silentRedirectUri}\\?code=[^&]+&state=[^&]+&iss=`))]);
        page.removeAllListeners('framenavigated');
        expect(page.url()).toBe(`${spa.origin}/`);
        expect(await page.locator('iframe').count()).toBe(0);
        await page.locator('#api-result').evaluate((element) => (element.textContent = ''));
        await page.getByRole('button', { name: 'Call the API' }).click();
        await expect.poll(apiResult).toEqual(authorization);

        // Sign out at the end_session_endpoint (id_token_hint, registered post_logout_redirect_uri), confirmed.
        await page.getByRole('button', { name: 'Sign out' }).click();
        await page.waitForURL(`${server.issuer}/oauth/logout?**`);
        await page.getByText('Example app').waitFor();
        await page.getByRole('button', { name: 'Sign out' }).click();
        await page.waitForURL(`${spa.origin}/`);
        await expect.poll(status).toBe('Signed out');

        // The next prompt=none finds no session: no code, so no third token request.
        await page.getByRole('button', { name: 'Renew silently' }).click();
        await expect.poll(() => page.locator('#error').textContent()).toBe('login_required');
        expect(tokenRequests).toBe(2);
        expect(await status()).toBe('Signed out');

        expect(await webStorage(page)).toEqual({ local: {}, session: {} });
        // The one value ever written to Web Storage: the pending sign-in's verifier, state and nonce, which
        // the callback removed. No token.
        expect(storageWrites).toEqual([{ key: 'example-app:pending-sign-in', value: expect.any(String) }]);
        expect(Object.keys(JSON.parse(storageWrites[0]!.value) as object).sort()).toEqual(['nonce', 'state', 'verifier']);
        expect(problems).toEqual([]);
      } catch (error) {
        throw await explainFailure(error, context, 'spa-sign-in');
      } finally {
        await context.close();
      }
    },
    BROWSER_TEST_TIMEOUT_MS,
  );

  it(
    'cannot show a sign-in page in a frame of the app',
    async () => {
      const { spa, server } = app;
      const context = await browser.newContext();
      context.setDefaultTimeout(ACTION_TIMEOUT_MS);
      try {
        const page = await context.newPage();
        const problems = watchConsole(page);
        await page.goto(`${spa.origin}/`);
        await page.evaluate((src) => {
          const frame = document.createElement('iframe');
          frame.src = src;
          document.body.append(frame);
        }, `${server.issuer}/oauth/login`);
        await expect.poll(() => problems.length).toBeGreaterThan(0);
        // CSP frame-ancestors is what Chromium enforces (it ignores X-Frame-Options beside it).
        expect(problems).toEqual([expect.stringMatching(/Framing '.+' violates .*"frame-ancestors 'none'"/)]);
        expect(await page.frameLocator('iframe').getByLabel('Email').count()).toBe(0);
      } catch (error) {
        throw await explainFailure(error, context, 'spa-framed-sign-in');
      } finally {
        await context.close();
      }
    },
    BROWSER_TEST_TIMEOUT_MS,
  );
});
