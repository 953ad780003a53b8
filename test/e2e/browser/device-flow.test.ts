import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAuthServer, type AuthServer } from './auth-server.js';
import { ACTION_TIMEOUT_MS, BROWSER_TEST_TIMEOUT_MS, CHROMIUM_AVAILABLE, launchChromium } from './chromium.js';
import { explainFailure, signIn, watchConsole } from './pages.js';

// RFC 8628 with a real browser on the user's side: the test plays the device (device authorization, then
// polling the token endpoint as told), Chromium plays the user who opens verification_uri_complete, signs in
// and approves.

const DEVICE_CODE = 'urn:ietf:params:oauth:grant-type:device_code';

/** RFC 8628 §3.5: each slow_down adds five seconds to the interval. */
const SLOW_DOWN_STEP_SECONDS = 5;

/** A margin on top of the interval, so that a poll never arrives early by the server's clock. */
const POLL_MARGIN_MS = 200;

interface PollAnswer {
  status: number;
  body: Record<string, unknown>;
}

async function postForm(url: string, form: Record<string, string>): Promise<PollAnswer> {
  const res = await fetch(url, { method: 'POST', body: new URLSearchParams(form) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe.skipIf(!CHROMIUM_AVAILABLE)('the device flow with the user in Chromium', () => {
  let server: AuthServer;
  let browser: Browser;
  let clientId: string;

  beforeAll(async () => {
    server = await startAuthServer();
    ({ clientId } = await server.registerClient({ name: 'Living-room TV', type: 'public', redirectUris: [], grantTypes: [DEVICE_CODE], scopes: ['read:posts', 'write:posts'] }));
    browser = await launchChromium();
  }, BROWSER_TEST_TIMEOUT_MS);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it(
    'the device polls as told while the user signs in and approves; then it gets its tokens',
    async () => {
      const user = await server.createUser();
      const started = await postForm(`${server.issuer}/oauth/device_authorization`, { client_id: clientId, scope: 'read:posts' });
      expect(started).toEqual({
        status: 200,
        body: {
          device_code: expect.any(String),
          user_code: expect.stringMatching(/^[A-Z]{4}-[A-Z]{4}$/),
          verification_uri: `${server.issuer}/oauth/device`,
          verification_uri_complete: `${server.issuer}/oauth/device?user_code=${String(started.body.user_code)}`,
          expires_in: 600,
          interval: 5,
        },
      });
      const { device_code: deviceCode, verification_uri_complete: verificationUri } = started.body as { device_code: string; verification_uri_complete: string };
      const poll = () => postForm(`${server.issuer}/oauth/token`, { grant_type: DEVICE_CODE, device_code: deviceCode, client_id: clientId });

      // The user has not even opened the page yet.
      const answers: PollAnswer[] = [await poll()];
      expect(answers[0]).toEqual({ status: 400, body: { error: 'authorization_pending', error_description: expect.any(String) } });

      // RFC 8628 §3.5: wait `interval` seconds between polls, five more after each slow_down.
      let interval = started.body.interval as number;
      let done = false;
      const deadline = Date.now() + BROWSER_TEST_TIMEOUT_MS;
      const polling = (async () => {
        while (!done && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, interval * 1000 + POLL_MARGIN_MS));
          const answer = await poll();
          answers.push(answer);
          if (answer.status === 200) return answer.body;
          if (answer.body.error === 'slow_down') interval += SLOW_DOWN_STEP_SECONDS;
          else if (answer.body.error !== 'authorization_pending') throw new Error(`device flow ended: ${JSON.stringify(answer.body)}`);
        }
        throw new Error('the device stopped polling');
      })();
      // Awaited below; a failure in the browser meanwhile must not leave it unhandled.
      polling.catch(() => undefined);

      const context = await browser.newContext();
      context.setDefaultTimeout(ACTION_TIMEOUT_MS);
      try {
        const page = await context.newPage();
        const problems = watchConsole(page);
        await page.goto(verificationUri);
        await signIn(page, user);
        await page.getByRole('heading', { name: 'Allow Living-room TV access?' }).waitFor();
        // RFC 8628 §5.4: the page shows the code being approved, for the user to compare with the device's.
        expect(await page.locator('#user-code').textContent()).toBe(String(started.body.user_code));
        expect(await page.getByRole('checkbox', { name: /^read:posts\b/ }).isChecked()).toBe(true);
        await page.getByRole('button', { name: 'Allow' }).click();
        await page.getByRole('heading', { name: 'Device connected' }).waitFor();
        expect(problems).toEqual([]);
      } catch (error) {
        done = true;
        throw await explainFailure(error, context, 'device-flow');
      } finally {
        await context.close();
      }

      const tokens = await polling;
      expect(tokens).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 600, scope: 'read:posts' });
      // Pending until the user approved, then the tokens; honouring the interval, never told to slow down.
      expect(answers.map((answer) => answer.body.error ?? 'tokens')).toEqual([...answers.slice(1).map(() => 'authorization_pending'), 'tokens']);
      const res = await fetch(`${server.issuer}/v1/authorization`, { headers: { authorization: `Bearer ${String(tokens.access_token)}` } });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ principal: { type: 'user', id: user.id, clientId }, scopes: ['read:posts'] });
    },
    BROWSER_TEST_TIMEOUT_MS,
  );
});
