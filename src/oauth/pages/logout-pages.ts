import { html, page, type Page } from './html.js';

export function logoutConfirmPage(model: { csrf: string; hidden: Readonly<Record<string, string>>; clientName: string | null; formTargets: readonly string[] }): Page {
  const hidden = Object.entries(model.hidden).map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}">\n`);
  return page(
    { title: 'Sign out', formTargets: model.formTargets },
    html`<h1>Sign out?</h1>
<p>${model.clientName === null ? 'You are about to sign out of Portcullis.' : html`<strong>${model.clientName}</strong> asks to sign you out of Portcullis.`}</p>
<form method="post" action="/oauth/logout">
<input type="hidden" name="csrf_token" value="${model.csrf}">
${hidden}<button type="submit">Sign out</button>
</form>`,
  );
}

export function signedOutPage(): Page {
  return page({ title: 'Signed out' }, html`<h1>Signed out</h1>\n<p class="notice" role="status">You are signed out.</p>`);
}
