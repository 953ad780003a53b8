/**
 * A presented access token is not acceptable. The message is what a client may see; `reason` is for the
 * logs only. Neither ever contains the token itself.
 */
export class InvalidTokenError extends Error {
  constructor(readonly reason: string) {
    super('The access token is invalid, expired or revoked.');
    this.name = 'InvalidTokenError';
  }
}

export function isInvalidTokenError(error: unknown): error is InvalidTokenError {
  return error instanceof InvalidTokenError;
}
