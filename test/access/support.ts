import { expect } from 'vitest';
import { ADMIN_CLIENT_ID, startTestApp, type TestApp } from '../helpers/app.js';

/** Shared fixtures of the access-control suites: exact error bodies and challenges, and small helpers. */

export const REALM = 'Bearer realm="portcullis"';
export const INVALID_TOKEN_CHALLENGE = `${REALM}, error="invalid_token", error_description="The access token is not valid"`;
export const INACTIVE_SUBJECT_CHALLENGE = `${REALM}, error="invalid_token", error_description="The token subject is no longer active"`;
export const INVALID_REQUEST_CHALLENGE = `${REALM}, error="invalid_request"`;

export const JSON_TYPE = 'application/json; charset=utf-8';

export const UNAUTHENTICATED = { error: { code: 'UNAUTHENTICATED', message: 'Authentication is required.' } };
export const INVALID_TOKEN = { error: { code: 'UNAUTHENTICATED', message: 'The access token is invalid, expired or revoked.' } };
export const FORBIDDEN = { error: { code: 'FORBIDDEN', message: 'Your role does not permit this action.' } };
export const NOT_FOUND = { error: { code: 'NOT_FOUND', message: 'The resource does not exist.' } };

export function insufficientScope(scope: string) {
  return { error: { code: 'INSUFFICIENT_SCOPE', message: `The access token needs the scope ${scope}.` } };
}

export function scopeChallenge(scope: string): string {
  return `${REALM}, error="insufficient_scope", scope="${scope}"`;
}

type Response = Awaited<ReturnType<TestApp['request']>>;

/** Status, body (whole) and the headers every error carries. */
export function expectError(res: Response, status: number, body: unknown, wwwAuthenticate?: string | null): void {
  expect({ status: res.statusCode, body: res.json() }).toEqual({ status, body });
  expect(res.headers['content-type']).toBe(JSON_TYPE);
  expect(res.headers['cache-control']).toBe('no-store');
  if (wwwAuthenticate === null) expect(res.headers['www-authenticate']).toBeUndefined();
  else if (wwwAuthenticate !== undefined) expect(res.headers['www-authenticate']).toBe(wwwAuthenticate);
}

/** A successful authenticated read: 200, JSON, private caching, and the whole body. */
export function expectPrivateJson(res: Response, body: unknown): void {
  expect({ status: res.statusCode, body: res.json() }).toEqual({ status: 200, body });
  expect(res.headers['content-type']).toBe(JSON_TYPE);
  expect(res.headers['cache-control']).toBe('private, no-cache');
  expect(res.headers.vary).toBe('Authorization, Accept');
  expect(res.headers['www-authenticate']).toBeUndefined();
}

/** The suites make many requests with one client's tokens; the rate limit is not what they test. */
export function startAccessApp(kind: 'sqlite' | 'postgres'): Promise<TestApp> {
  return startTestApp(kind, { RATE_LIMIT_MAX: '1000000', RATE_LIMIT_ANONYMOUS_MAX: '1000000', RATE_LIMIT_ADDRESS_MAX: '1000000', AUDIT_FAILURE_WINDOW: '1' });
}

export interface PostView {
  id: string;
  authorId: string;
  title: string;
  body: string;
  status: 'draft' | 'published';
  createdAt: string;
  updatedAt: string;
}

export async function createPost(t: TestApp, token: string, post: { title: string; body?: string; status: 'draft' | 'published' }): Promise<PostView> {
  const res = await t.request({ method: 'POST', url: '/v1/posts', token, body: { body: 'text', ...post } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as PostView;
}

export interface CommentView {
  id: string;
  postId: string;
  authorId: string;
  body: string;
  createdAt: string;
}

export async function createComment(t: TestApp, token: string, postId: string, body: string): Promise<CommentView> {
  const res = await t.request({ method: 'POST', url: `/v1/posts/${postId}/comments`, token, body: { body } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as CommentView;
}

/** The user as GET /v1/users/{id} shows it (read with an admin token). */
export async function readUser(t: TestApp, id: string): Promise<Record<string, unknown>> {
  const res = await t.request({ url: `/v1/users/${id}`, token: await t.adminClientToken() });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as Record<string, unknown>;
}

export { ADMIN_CLIENT_ID };
