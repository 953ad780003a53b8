import { ApiError } from '../errors/registry.js';
import type { Principal } from '../policy/principal.js';

/** The caller's id (user id or client registration id); operations that record an author are authenticated. */
export function callerId(principal: Principal): string {
  if (principal.kind === 'anonymous') throw new ApiError('UNAUTHENTICATED');
  return principal.id;
}
