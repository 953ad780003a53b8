import { html, page, type Page } from './html.js';

export interface ScopeChoice {
  name: string;
  description: string;
}

export interface ConsentPageModel {
  /** Form action: /oauth/consent or /oauth/device/consent. */
  action: string;
  hidden: Readonly<Record<string, string>>;
  clientName: string;
  userEmail: string;
  scopes: readonly ScopeChoice[];
  formTargets?: readonly string[];
  /** A device's user code, as the device shows it: the user compares the two before allowing (RFC 8628 §5.4). */
  userCode?: string;
}

/** Each requested scope with its description from the contract, ticked by default and free to untick. */
export function consentPage(model: ConsentPageModel): Page {
  const hidden = Object.entries(model.hidden).map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}">\n`);
  const choices = model.scopes.map(
    (scope, i) => html`<label for="scope-${i}"><input id="scope-${i}" type="checkbox" name="scope" value="${scope.name}" checked>
<span><strong>${scope.name}</strong><br>${scope.description}</span></label>
`,
  );
  return page(
    { title: 'Allow access', formTargets: model.formTargets },
    html`<h1>Allow ${model.clientName} access?</h1>
<p>Signed in as <strong>${model.userEmail}</strong>.</p>
${model.userCode === undefined ? '' : html`<p>Your device should show the code <strong id="user-code">${model.userCode}</strong>. If it shows another code, deny: someone else is asking for access.</p>
`}<form method="post" action="${model.action}">
${hidden}<fieldset>
<legend>${model.clientName} asks to:</legend>
${choices}</fieldset>
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny" class="secondary">Deny</button>
</form>`,
  );
}
