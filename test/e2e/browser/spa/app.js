import { OAuthClient, OAuthError } from './oauth-client.js';

const element = (id) => document.getElementById(id);
const client = await OAuthClient.load().catch(showError);

function render() {
  const session = client?.session;
  element('status').textContent = session ? `Signed in as ${session.subject}` : 'Signed out';
  element('token').textContent = session ? `Access token ${session.number}, scope: ${session.scope}` : '';
}

function showError(error) {
  element('error').textContent = error instanceof OAuthError ? `${error.error}` : String(error.message ?? error);
}

async function run(action) {
  element('error').textContent = '';
  try {
    await action();
  } catch (error) {
    showError(error);
  }
  render();
}

if (client) {
  if (location.pathname === '/callback') {
    const params = new URLSearchParams(location.search);
    // The code and state leave the address bar and the history entry before anything else happens.
    history.replaceState(null, '', '/');
    await run(() => client.completeSignIn(params));
  } else {
    render();
  }
  element('sign-in').addEventListener('click', () => run(() => client.beginSignIn()));
  element('renew').addEventListener('click', () => run(() => client.renewSilently()));
  element('sign-out').addEventListener('click', () => client.signOut());
  element('call-api').addEventListener('click', () =>
    run(async () => {
      const { status, body } = await client.callApi('/v1/authorization');
      element('api-result').textContent = JSON.stringify({ status, body }, null, 2);
    }),
  );
}
