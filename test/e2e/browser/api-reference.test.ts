import fs from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACTION_TIMEOUT_MS, BROWSER_TEST_TIMEOUT_MS, CHROMIUM_AVAILABLE, launchChromium } from './chromium.js';
import { startAuthServer, type AuthServer } from './auth-server.js';
import { ARTIFACTS, explainFailure, watchConsole } from './pages.js';

// The API reference as a reader meets it: Redoc renders the published contract, every tag and operation,
// from this server alone.

describe.skipIf(!CHROMIUM_AVAILABLE)('the API reference in Chromium', () => {
  let server: AuthServer;
  let browser: Browser;

  beforeAll(async () => {
    server = await startAuthServer();
    browser = await launchChromium();
  }, BROWSER_TEST_TIMEOUT_MS);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it(
    'shows every tag and operation of the published contract, loading nothing from another host',
    async () => {
      const spec = (await (await fetch(`${server.issuer}/v1/rest`)).json()) as {
        tags: { name: string }[];
        paths: Record<string, Record<string, { operationId: string; tags: string[] }>>;
      };
      const operations = Object.values(spec.paths).flatMap((item) => Object.values(item).map((op) => `tag/${op.tags[0]}/operation/${op.operationId}`));
      const context = await browser.newContext();
      context.setDefaultTimeout(ACTION_TIMEOUT_MS);
      try {
        const page = await context.newPage();
        const problems = watchConsole(page);
        const requested: string[] = [];
        page.on('request', (request) => requested.push(request.url()));
        await page.goto(`${server.issuer}/docs`);

        for (const { name } of spec.tags) {
          await page.getByRole('menuitem', { name, exact: true }).waitFor();
          await expect.poll(() => page.locator(`[data-section-id="tag/${name}"] h2`).first().textContent()).toBe(name);
        }
        expect(spec.tags.map((tag) => tag.name)).toEqual(['Audit', 'Clients', 'Comments', 'Meta', 'Posts', 'Users']);
        const shown = await page.locator('[data-section-id*="/operation/"]').evaluateAll((sections) => sections.map((s) => s.getAttribute('data-section-id')));
        expect(shown.sort()).toEqual([...operations].sort());
        expect(operations).toHaveLength(31);

        fs.mkdirSync(ARTIFACTS, { recursive: true });
        const screenshot = path.join(ARTIFACTS, 'api-reference.png');
        await page.screenshot({ path: screenshot });
        console.log(`API reference screenshot: ${screenshot}`);

        // The page, Redoc, the contract and Redoc's search worker (a blob: of this origin); nothing else.
        expect(requested.filter((url) => !url.startsWith(`${server.issuer}/`) && !url.startsWith(`blob:${server.issuer}/`))).toEqual([]);
        expect(requested.filter((url) => url.startsWith(`${server.issuer}/`)).sort()).toEqual(
          [`${server.issuer}/docs`, `${server.issuer}/docs/redoc.standalone.js`, `${server.issuer}/v1/rest`].sort(),
        );
        expect(problems).toEqual([]);

        // The policy is in force: a script on the page cannot reach another origin.
        const attempt = await page.evaluate(async (url) => {
          const violation = new Promise<string>((resolve) => document.addEventListener('securitypolicyviolation', (e) => resolve(e.effectiveDirective), { once: true }));
          const outcome = await fetch(url).then(
            () => 'loaded',
            () => 'refused',
          );
          return [outcome, await violation];
        }, 'http://127.0.0.2:9/');
        expect(attempt).toEqual(['refused', 'connect-src']);
      } catch (error) {
        throw await explainFailure(error, context, 'api-reference');
      } finally {
        await context.close();
      }
    },
    BROWSER_TEST_TIMEOUT_MS,
  );
});
