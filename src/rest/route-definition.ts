import type { OperationAccess } from '../policy/table.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface JsonSchema {
  [key: string]: unknown;
}

/** One REST operation as codegen compiles it from openapi.yaml (generated/routes.ts). */
export interface RouteDefinition {
  operationId: string;
  method: HttpMethod;
  /** The contract's path, e.g. `/v1/users/{userId}`. */
  path: string;
  /**
   * The same path without its version prefix, in Fastify's syntax, e.g. `/users/:userId`; null when that
   * path belongs to another API (`/graphql`).
   */
  unversionedUrl: string | null;
  tag: string;
  summary: string;
  deprecated: boolean;
  /**
   * Response headers of a deprecated operation, rendered at build time from `x-deprecated-since` and
   * `x-sunset`: `Deprecation` (RFC 9745, `@<epoch seconds>`) and `Sunset` (RFC 8594, an HTTP-date).
   */
  deprecationHeaders: Record<string, string>;
  successStatus: number;
  /** Media type of the success response body, or null when it has none (204). */
  successMediaType: string | null;
  /** Media type of the request body (`application/json`, or `application/merge-patch+json` for PATCH); null without one. */
  bodyMediaType: string | null;
  expand: string[];
  schema: {
    params?: JsonSchema;
    querystring?: JsonSchema;
    headers?: JsonSchema;
    body?: JsonSchema;
    response: Record<string, JsonSchema>;
  };
  access: OperationAccess;
}
