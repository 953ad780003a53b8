import { html, page, type Page } from './html.js';

export interface AccountPageModel {
  email: string;
  name: string;
  applications: readonly { clientRegistrationId: string; name: string; scopes: string; grantedAt: string }[];
  csrf: { password: string; email: string; revoke: string; everywhere: string; logout: string };
  notice: string | null;
  error: string | null;
  status?: number;
}

/** The user's own account: change the password or the sign-in email, see and withdraw the applications holding access, sign out here or everywhere. */
export function accountPage(model: AccountPageModel): Page {
  const rows = model.applications.map(
    (app) => html`<tr><td>${app.name}</td><td>${app.scopes}</td><td>${app.grantedAt.slice(0, 10)}</td><td>
<form method="post" action="/oauth/account/applications/revoke">
<input type="hidden" name="csrf_token" value="${model.csrf.revoke}">
<input type="hidden" name="application" value="${app.clientRegistrationId}">
<button type="submit" class="secondary" aria-label="Revoke access of ${app.name}">Revoke</button>
</form></td></tr>
`,
  );
  return page(
    { title: 'Your account', status: model.status },
    html`<h1>Your account</h1>
<p>Signed in as <strong>${model.email}</strong> (${model.name}).</p>
${model.notice === null ? '' : html`<p class="notice" role="status">${model.notice}</p>`}
${model.error === null ? '' : html`<p class="error" role="alert">${model.error}</p>`}
<h2>Change password</h2>
<form method="post" action="/oauth/account/password">
<input type="hidden" name="csrf_token" value="${model.csrf.password}">
<label for="current_password">Current password</label>
<input id="current_password" name="current_password" type="password" autocomplete="current-password" required>
<label for="new_password">New password (at least 12 characters)</label>
<input id="new_password" name="new_password" type="password" autocomplete="new-password" minlength="12" maxlength="256" required>
<button type="submit">Change password</button>
</form>
<h2>Change email</h2>
<form method="post" action="/oauth/account/email">
<input type="hidden" name="csrf_token" value="${model.csrf.email}">
<label for="email_current_password">Current password</label>
<input id="email_current_password" name="current_password" type="password" autocomplete="current-password" required>
<label for="new_email">New email address (you sign in with it)</label>
<input id="new_email" name="new_email" type="email" autocomplete="email" maxlength="254" required>
<button type="submit">Change email</button>
</form>
<h2>Applications with access</h2>
${model.applications.length === 0 ? html`<p>None.</p>` : html`<table><thead><tr><th>Application</th><th>Access</th><th>Since</th><th></th></tr></thead><tbody>
${rows}</tbody></table>`}
<h2>Sign out</h2>
<form method="post" action="/oauth/logout">
<input type="hidden" name="csrf_token" value="${model.csrf.logout}">
<button type="submit" class="secondary">Sign out</button>
</form>
<form method="post" action="/oauth/account/sign-out-everywhere">
<input type="hidden" name="csrf_token" value="${model.csrf.everywhere}">
<button type="submit" class="secondary">Sign out everywhere</button>
</form>`,
  );
}
