import { ApiError } from '../errors/registry.js';
import type { Principal } from '../policy/principal.js';

/** The caller's subject id; operations that record an author reach here only authenticated. */
export function requireSubject(principal: Principal): string {
  if (principal.kind === 'anonymous') throw new ApiError('UNAUTHENTICATED');
  return principal.subject;
}
