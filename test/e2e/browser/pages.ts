import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page } from 'playwright-core';
import type { SignInUser } from './auth-server.js';

/**
 * Fills the sign-in page through its labels, as a user (or a screen reader) finds the fields: a field
 * without its label fails here.
 */
export async function signIn(page: Page, user: SignInUser): Promise<void> {
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await page.getByLabel('Email').fill(user.email);
  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/**
 * Every console error and uncaught exception of a page and its frames, with the URL it happened on: a
 * style, script or form the CSP blocks shows up here.
 */
export function watchConsole(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`${message.location().url}: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`${page.url()}: ${error.message}`));
  return problems;
}

/** The token endpoint's answer to the request that `action` makes the page send. */
export async function tokenResponse(page: Page, issuer: string, action: () => Promise<void>): Promise<Record<string, unknown>> {
  const [response] = await Promise.all([
    page.waitForResponse((res) => res.url() === `${issuer}/oauth/token` && res.request().method() === 'POST'),
    action(),
  ]);
  const body = (await response.json()) as Record<string, unknown>;
  if (response.status() !== 200) throw new Error(`token endpoint: ${response.status()} ${JSON.stringify(body)}`);
  return body;
}

/** Where browser tests leave what a person may want to look at afterwards (gitignored). */
export const ARTIFACTS = fileURLToPath(new URL('../../../test-artifacts/', import.meta.url));

/** How much of a page's text a failure quotes. */
const QUOTED_TEXT = 600;

/**
 * A failed browser test's error, told what each page of its context showed at that moment (its URL and the
 * start of its text) and with a screenshot of each left in test-artifacts/: a step that timed out then says
 * which page it was waiting on and what that page said, not only which element never appeared.
 */
export async function explainFailure(error: unknown, context: BrowserContext, name: string): Promise<unknown> {
  const shown: string[] = [];
  for (const [i, page] of context.pages().entries()) {
    try {
      const text = (await page.locator('body').innerText({ timeout: 2000 })).replace(/\s+/g, ' ').trim();
      fs.mkdirSync(ARTIFACTS, { recursive: true });
      const screenshot = path.join(ARTIFACTS, `${name}-failure-${i + 1}.png`);
      await page.screenshot({ path: screenshot, fullPage: true, timeout: 5000 });
      shown.push(`${page.url()} (screenshot: ${screenshot})\n  ${text.slice(0, QUOTED_TEXT)}${text.length > QUOTED_TEXT ? '…' : ''}`);
    } catch (reason) {
      shown.push(`${page.url()} (its text could not be read: ${(reason as Error).message.split('\n')[0]})`);
    }
  }
  if (error instanceof Error) {
    error.message += `\n\nThe pages when it failed:\n${shown.length > 0 ? shown.map((line) => `- ${line}`).join('\n') : '(none open)'}`;
  }
  return error;
}
