import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policy } from '../../../generated/policy.js';
import { USER_SCOPES } from '../../../src/oauth/scopes.js';
import { longestAccessToken } from '../../../src/oauth/tokens/jwt-access-token.js';
import { newId } from '../../../src/storage/ids.js';
import { startTestApp, type TestApp } from '../../helpers/app.js';
import { createClient } from '../fixtures.js';

// The server refuses to start with a MAX_TOKEN_LENGTH below `longestAccessToken` (app.ts): that bound must
// not be shorter than a token it really issues, or it would start and then refuse its own tokens. A claim
// added to access tokens without the bound knowing of it fails here.
describe('the longest access token the server can issue', () => {
  const ISSUER = 'http://127.0.0.1:3000';
  const scopes = [...new Set([...Object.keys(policy.scopes), ...USER_SCOPES])];
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp('sqlite', { ISSUER });
  });
  afterAll(() => t?.close());

  it("is at least as long as a client's token and a user's, each with every scope and a client id of 128 characters", async () => {
    const bound = await longestAccessToken(ISSUER, scopes, newId());
    const { client } = await createClient(t.database.db, { clientId: 'c'.repeat(128), scopes, grantTypes: ['client_credentials', 'authorization_code'] });
    const user = await t.createUser('member');
    const clientToken = await t.app.tokens.issueAccessToken({ client, subject: client.clientId, subjectType: 'client', scopes, grantType: 'client_credentials' });
    const userToken = await t.app.tokens.issueAccessToken({ client, subject: user.id, subjectType: 'user', scopes, grantType: 'authorization_code' });
    // Both are JWTs that carry every scope (the longest kind), the client's with its registration claims.
    for (const token of [clientToken, userToken]) {
      expect(token.scope.split(' ').sort()).toEqual([...scopes].sort());
      expect(token.accessToken.split('.')).toHaveLength(3);
    }
    expect(JSON.parse(Buffer.from(clientToken.accessToken.split('.')[1]!, 'base64url').toString())).toEqual(expect.objectContaining({ reg: client.id, rev: 0 }));
    expect({ client: clientToken.accessToken.length <= bound, user: userToken.accessToken.length <= bound }).toEqual({ client: true, user: true });
    // And not far above them: the bound is the same token with its numbers at their longest.
    expect(bound - clientToken.accessToken.length).toBeLessThan(100);
  });
});
