import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { policy } from '../../generated/policy.js';
import { routes } from '../../generated/routes.js';

const gateway = JSON.parse(fs.readFileSync('generated/gateway-policy.json', 'utf8')) as {
  routes: { operationId: string; method: string; paths: string[]; authenticated: boolean; scopes: string[] }[];
};

describe('gateway policy export', () => {
  it('has one entry per route with the same coarse checks the service applies', () => {
    expect(gateway.routes.map((r) => r.operationId)).toEqual(routes.map((r) => r.operationId));
    for (const route of routes) {
      const entry = gateway.routes.find((r) => r.operationId === route.operationId)!;
      const access = policy.operations[`rest:${route.operationId}`]!;
      expect(entry).toEqual({
        operationId: route.operationId,
        method: route.method,
        // `/graphql` is the GraphQL endpoint's: the SDL is at `/v1/graphql` only.
        paths: route.path === '/v1/graphql' ? [route.path] : [route.path, route.path.replace(/^\/v1/, '')],
        authenticated: !access.public,
        scopes: access.scopes,
      });
    }
  });

  it('never lets through anonymously what the service protects, and names only catalogue scopes', () => {
    for (const entry of gateway.routes) {
      const access = policy.operations[`rest:${entry.operationId}`]!;
      if (!access.public) expect(entry.authenticated, entry.operationId).toBe(true);
      for (const scope of entry.scopes) expect(Object.keys(policy.scopes)).toContain(scope);
    }
  });
});
