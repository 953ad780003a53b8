import { html, page, type Page } from './html.js';

export function deviceEntryPage(error: string | null, status = 200): Page {
  return page(
    { title: 'Connect a device', status },
    html`<h1>Connect a device</h1>
<p>Enter the code your device shows.</p>
${error === null ? '' : html`<p class="error" role="alert">${error}</p>`}
<form method="get" action="/oauth/device">
<label for="user_code">Code</label>
<input id="user_code" name="user_code" type="text" autocomplete="off" autocapitalize="characters" spellcheck="false" required maxlength="16" placeholder="XXXX-XXXX">
<button type="submit">Continue</button>
</form>`,
  );
}

export function deviceDonePage(approved: boolean): Page {
  return page(
    { title: approved ? 'Device connected' : 'Device not connected' },
    html`<h1>${approved ? 'Device connected' : 'Device not connected'}</h1>
<p class="notice" role="status">${approved ? 'You can return to your device; it will continue on its own.' : 'You denied the request. The device gets no access.'}</p>`,
  );
}
