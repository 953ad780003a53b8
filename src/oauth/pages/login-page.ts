import { html, page, type Page } from './html.js';

export interface LoginPageModel {
  /** The stored interaction's id; empty when the form carries all there is (account, device user code). */
  interaction: string;
  userCode: string | null;
  csrf: string;
  /** Who asks the user to sign in, when an application does. */
  clientName: string | null;
  email: string;
  error: string | null;
  status?: number;
  formTargets?: readonly string[];
}

export function loginPage(model: LoginPageModel): Page {
  return page(
    { title: 'Sign in', status: model.status, formTargets: model.formTargets },
    html`<h1>Sign in</h1>
${model.clientName === null ? '' : html`<p><strong>${model.clientName}</strong> asks you to sign in.</p>`}
${model.error === null ? '' : html`<p class="error" role="alert">${model.error}</p>`}
<form method="post" action="/oauth/login">
${model.interaction === '' ? '' : html`<input type="hidden" name="interaction" value="${model.interaction}">`}
${model.userCode === null ? '' : html`<input type="hidden" name="user_code" value="${model.userCode}">`}
<input type="hidden" name="csrf_token" value="${model.csrf}">
<label for="email">Email</label>
<input id="email" name="email" type="email" autocomplete="username" required value="${model.email}">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>`,
  );
}
