import fs from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/**
 * The browser suites drive the Chromium the machine has (Debian's `chromium` package, or the binary
 * PORTCULLIS_CHROMIUM names); no browser is downloaded. Without it they are skipped with a notice. With
 * PORTCULLIS_TEST_BROWSER=require (set by .ci/run) a missing Chromium fails the run instead.
 */
export const CHROMIUM_PATH = process.env.PORTCULLIS_CHROMIUM ?? '/usr/bin/chromium';
const BROWSER_REQUIRED = process.env.PORTCULLIS_TEST_BROWSER === 'require';

function isChromiumInstalled(): boolean {
  try {
    fs.accessSync(CHROMIUM_PATH, fs.constants.X_OK);
    return true;
  } catch {
    if (BROWSER_REQUIRED) throw new Error(`Chromium is required but not executable at ${CHROMIUM_PATH} (apt-get install -y chromium, or set PORTCULLIS_CHROMIUM)`);
    console.warn(`[portcullis tests] Chromium not found at ${CHROMIUM_PATH}: skipping the browser suite`);
    return false;
  }
}

export const CHROMIUM_AVAILABLE = isChromiumInstalled();

/** How long one browser action (a click, a navigation, an awaited event) may take before the test fails. */
export const ACTION_TIMEOUT_MS = 15_000;

/** A browser test's whole budget: every flow here takes a few seconds, the device flow's polling about ten. */
export const BROWSER_TEST_TIMEOUT_MS = 60_000;

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    // The https servers of the suite use a self-signed certificate (tls.ts).
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--ignore-certificate-errors'],
    timeout: 30_000,
  });
}
