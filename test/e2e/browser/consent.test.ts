import fs from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACTION_TIMEOUT_MS, BROWSER_TEST_TIMEOUT_MS, CHROMIUM_AVAILABLE, launchChromium } from './chromium.js';
import { startExampleApp, type ExampleApp } from './example-app.js';
import { ARTIFACTS, explainFailure, signIn, tokenResponse, watchConsole } from './pages.js';

// The consent page as a user meets it: every requested scope ticked, any of them free to untick; what was
// unticked is not granted.

describe.skipIf(!CHROMIUM_AVAILABLE)('the consent page in Chromium', () => {
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
    'a scope the user unticks is not in the token',
    async () => {
      const { spa, server } = app;
      const user = await server.createUser();
      const context = await browser.newContext();
      context.setDefaultTimeout(ACTION_TIMEOUT_MS);
      try {
        const page = await context.newPage();
        const problems = watchConsole(page);
        await page.goto(`${spa.origin}/`);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await signIn(page, user);
        await page.getByRole('heading', { name: 'Allow Example app access?' }).waitFor();

        // Nothing sticks out of the page's box, not even a long email address.
        expect(await page.locator('main p').evaluateAll((paragraphs) => paragraphs.filter((p) => p.scrollWidth > p.clientWidth).map((p) => p.textContent))).toEqual([]);
        const boxes = page.getByRole('checkbox');
        expect(await boxes.evaluateAll((inputs) => inputs.map((input) => [(input as HTMLInputElement).value, (input as HTMLInputElement).checked]))).toEqual([
          ['openid', true],
          ['profile', true],
          ['read:posts', true],
        ]);
        const profile = page.getByRole('checkbox', { name: /^profile\b/ });
        await profile.click();
        expect(await profile.isChecked()).toBe(false);
        fs.mkdirSync(ARTIFACTS, { recursive: true });
        const screenshot = path.join(ARTIFACTS, 'consent-page.png');
        await page.screenshot({ path: screenshot, fullPage: true });
        console.log(`consent page screenshot: ${screenshot}`);

        const tokens = await tokenResponse(page, server.issuer, () => page.getByRole('button', { name: 'Allow' }).click());
        expect(tokens).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 600, scope: 'openid read:posts', id_token: expect.any(String) });
        await expect.poll(() => page.locator('#token').textContent()).toBe('Access token 1, scope: openid read:posts');
        expect(problems).toEqual([]);
      } catch (error) {
        throw await explainFailure(error, context, 'consent');
      } finally {
        await context.close();
      }
    },
    BROWSER_TEST_TIMEOUT_MS,
  );
});
