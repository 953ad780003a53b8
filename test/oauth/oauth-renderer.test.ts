import { describe, expect, it } from 'vitest';
import { renderOAuthError } from '../../src/errors/oauth-renderer.js';
import { ApiError } from '../../src/errors/registry.js';
import { OAuthError } from '../../src/oauth/oauth-error.js';

describe('OAuth error renderer', () => {
  it('renders an OAuthError as RFC 6749 §5.2 with its status and headers, never cacheable', () => {
    const error = new OAuthError('invalid_client', 'Client authentication failed.', 401, { 'WWW-Authenticate': 'Basic realm="portcullis"' });
    expect(renderOAuthError(error)).toEqual({
      status: 401,
      headers: { 'WWW-Authenticate': 'Basic realm="portcullis"', 'Cache-Control': 'no-store', Pragma: 'no-cache' },
      body: { error: 'invalid_client', error_description: 'Client authentication failed.' },
    });
  });

  it('hides internal failures behind server_error', () => {
    expect(renderOAuthError(new Error('relation "clients" does not exist at 10.0.0.3'))).toEqual({
      status: 500,
      headers: { 'Cache-Control': 'no-store', Pragma: 'no-cache' },
      body: { error: 'server_error', error_description: 'An internal error occurred.' },
    });
  });

  it('reports an unreachable database as temporarily_unavailable (503), with Retry-After', () => {
    const error = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    expect(renderOAuthError(error)).toEqual({
      status: 503,
      headers: { 'retry-after': '2', 'Cache-Control': 'no-store', Pragma: 'no-cache' },
      body: { error: 'temporarily_unavailable', error_description: 'The service is temporarily unavailable; try again later.' },
    });
  });

  it('reports the server\'s own UNAVAILABLE refusal as temporarily_unavailable with its message and Retry-After', () => {
    expect(renderOAuthError(new ApiError('UNAVAILABLE', 'The audit log cannot be written at the moment; retry.'))).toEqual({
      status: 503,
      headers: { 'retry-after': '2', 'Cache-Control': 'no-store', Pragma: 'no-cache' },
      body: { error: 'temporarily_unavailable', error_description: 'The audit log cannot be written at the moment; retry.' },
    });
    // Any other API error is none of the client's business here: a generic server_error.
    expect(renderOAuthError(new ApiError('CONFLICT')).body).toEqual({ error: 'server_error', error_description: 'An internal error occurred.' });
  });
});
