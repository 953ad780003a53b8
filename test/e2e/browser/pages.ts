import type { Page } from 'playwright-core';
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
