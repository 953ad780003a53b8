import { html, page, type Page } from './html.js';

/** What to do next on most error pages: the application that sent the user here starts over. */
export const RETURN_TO_APPLICATION = 'Return to the application you came from and try again.';

/**
 * Where a request ends when redirecting would be unsafe (RFC 6749 §4.1.2.1: an unknown client or a
 * redirect_uri that does not match is never redirected to) or when there is nowhere to return to. The
 * message says what went wrong, the instruction — one — what the user can do about it.
 */
export function errorPage(status: number, title: string, message: string, instruction = RETURN_TO_APPLICATION): Page {
  return page(
    { title, status },
    html`<h1>${title}</h1>
<p class="error" role="alert">${message}</p>
<p>${instruction}</p>`,
  );
}

/** A form whose CSRF token does not verify for this browser: nothing it asked for is done. */
export const FORM_EXPIRED = errorPage(403, 'Form expired', 'The form could not be verified.', 'Reload the page and try again.');
