import fs from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACTION_TIMEOUT_MS, BROWSER_TEST_TIMEOUT_MS, CHROMIUM_AVAILABLE, launchChromium } from './chromium.js';
import { startAuthServer, type AuthServer } from './auth-server.js';
import { ARTIFACTS, explainFailure, watchConsole } from './pages.js';

// GraphiQL as a developer meets it: the editor, the schema from introspection, a query run against
// POST /graphql — all from this server.

describe.skipIf(!CHROMIUM_AVAILABLE)('GraphiQL in Chromium', () => {
  let server: AuthServer;
  let browser: Browser;

  beforeAll(async () => {
    // Introspection open, so that the page needs no token to load the schema.
    server = await startAuthServer({ GRAPHQL_INTROSPECTION_PUBLIC: 'true' });
    browser = await launchChromium();
  }, BROWSER_TEST_TIMEOUT_MS);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it(
    'renders the editor, loads the schema and runs a query, loading nothing from another host',
    async () => {
      const context = await browser.newContext();
      context.setDefaultTimeout(ACTION_TIMEOUT_MS);
      try {
        const page = await context.newPage();
        const problems = watchConsole(page);
        const requested: string[] = [];
        const failed: string[] = [];
        page.on('request', (request) => requested.push(`${request.method()} ${request.url()}`));
        page.on('response', (response) => {
          if (response.status() >= 400) failed.push(`${response.status()} ${response.url()}`);
        });
        await page.goto(`${server.issuer}/graphiql`);
        await page.locator('.graphiql-query-editor .CodeMirror').waitFor();
        // The schema arrived: the documentation explorer lists the root types.
        await page.locator('.graphiql-sidebar button[aria-label="Show Documentation Explorer"]').click();
        await page.getByText('Query', { exact: true }).first().waitFor();

        await page.evaluate(() => {
          const editor = document.querySelector('.graphiql-query-editor .CodeMirror') as unknown as { CodeMirror: { setValue(v: string): void } };
          editor.CodeMirror.setValue('{ __typename }');
        });
        await page.locator('.graphiql-execute-button').click();
        await expect.poll(() => page.locator('.graphiql-response .CodeMirror').textContent()).toContain('"__typename": "Query"');

        fs.mkdirSync(ARTIFACTS, { recursive: true });
        await page.screenshot({ path: path.join(ARTIFACTS, 'graphiql.png') });

        expect(requested.filter((entry) => !entry.split(' ')[1]!.startsWith(`${server.issuer}/`))).toEqual([]);
        const gets = requested.filter((entry) => entry.startsWith('GET ')).map((entry) => entry.slice(4).replace(server.issuer, ''));
        expect(gets.sort()).toEqual(
          ['/graphiql', '/graphiql/graphiql.min.css', '/graphiql/react.production.min.js', '/graphiql/react-dom.production.min.js', '/graphiql/graphiql.min.js', '/graphiql/start.js'].sort(),
        );
        expect(requested.filter((entry) => entry.startsWith('POST ')).every((entry) => entry === `POST ${server.issuer}/graphql`)).toBe(true);
        expect(failed).toEqual([]);
        expect(problems).toEqual([]);
      } catch (error) {
        throw await explainFailure(error, context, 'graphiql');
      } finally {
        await context.close();
      }
    },
    BROWSER_TEST_TIMEOUT_MS,
  );
});
