/**
 * The one registry of API error codes. The README's error table is checked against it by a test,
 * and the contract's Error schema enumerates the same codes.
 */
export const ERROR_CODES = {
  VALIDATION_FAILED: { status: 400, message: 'The request is not valid.' },
  UNAUTHENTICATED: { status: 401, message: 'Authentication is required.' },
  INSUFFICIENT_SCOPE: { status: 403, message: 'The access token does not carry the required scope.' },
  FORBIDDEN: { status: 403, message: 'Your role does not permit this action.' },
  NOT_FOUND: { status: 404, message: 'The resource does not exist.' },
  METHOD_NOT_ALLOWED: { status: 405, message: 'The method is not allowed on this resource.' },
  NOT_ACCEPTABLE: { status: 406, message: 'The requested API version or media type is not available.' },
  REQUEST_TIMEOUT: { status: 408, message: 'The request did not arrive in time.' },
  CONFLICT: { status: 409, message: 'The request conflicts with the current state of the resource.' },
  PRECONDITION_FAILED: { status: 412, message: 'The resource has changed since it was read.' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'The request body is too large.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'The request body must be application/json.' },
  IDEMPOTENCY_KEY_REUSED: { status: 422, message: 'The idempotency key was used with a different request.' },
  RATE_LIMITED: { status: 429, message: 'Too many requests.' },
  HEADERS_TOO_LARGE: { status: 431, message: 'The request headers are too large.' },
  INTERNAL: { status: 500, message: 'An internal error occurred.' },
  UNAVAILABLE: { status: 503, message: 'The service is temporarily unavailable.' },
  QUERY_TOO_DEEP: { status: 400, message: 'The GraphQL document is nested too deeply.' },
  QUERY_TOO_COMPLEX: { status: 400, message: 'The GraphQL document asks for too much.' },
  PERSISTED_QUERY_NOT_FOUND: { status: 400, message: 'The document is not one of the trusted documents.' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;

/**
 * What `UNAVAILABLE` tells a client to wait when nothing more precise is known (an unreachable database, a
 * full audit buffer): RFC 9110 §10.2.3 `Retry-After`, on every 503 of every interface.
 */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 2;

export interface ErrorDetail {
  path: string;
  message: string;
}

/** An error that is safe to show to the client: its code, message and details are the whole response. */
export class ApiError extends Error {
  readonly status: number;
  readonly headers: Record<string, string>;

  constructor(
    readonly code: ErrorCode,
    message: string = ERROR_CODES[code].message,
    options: { details?: ErrorDetail[]; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'ApiError';
    this.status = ERROR_CODES[code].status;
    this.headers = code === 'UNAVAILABLE' ? { 'retry-after': String(UNAVAILABLE_RETRY_AFTER_SECONDS), ...options.headers } : (options.headers ?? {});
    this.details = options.details;
  }

  readonly details: ErrorDetail[] | undefined;
}

export function isApiError(error: unknown): error is ApiError {
  return error instanceof ApiError;
}
