import type { Kysely } from 'kysely';
import type { AuditDecision } from '../../audit/audit-event.js';
import type { Config } from '../../config/config.js';
import type { SignInThrottle } from '../../limits/sign-in-throttle.js';
import type { Database } from '../../storage/schema.js';
import type { CookieJar } from './cookies.js';
import type { CsrfTokens } from './csrf.js';
import type { InteractionStore } from './interaction-store.js';
import type { KnownDevices } from './known-devices.js';
import type { SignInSessions } from './sign-in-sessions.js';

/** What the authorization server's pages (authorize, login, consent, device, account, logout) work with. */
export interface PageDeps {
  db: Kysely<Database>;
  config: Config;
  jar: CookieJar;
  csrf: CsrfTokens;
  sessions: SignInSessions;
  interactions: InteractionStore;
  throttle: SignInThrottle;
  knownDevices: KnownDevices;
  /** The contract's scope catalogue: name -> description shown on the consent page. */
  scopeDescriptions: Readonly<Record<string, string>>;
  audit: { record(decision: AuditDecision): void };
  /** Drops what this process cached about a user's tokens (other processes follow the invalidation feed). */
  forgetUser(userId: string): void;
  clock: () => number;
  /** Tests only: awaited after the user's session was checked and before a code or device approval is stored. */
  beforeCodeIssued?: () => Promise<void>;
  /** Tests only: awaited after the account page checked the current password and before the change is made. */
  beforeAccountChange?: () => Promise<void>;
}

/** Who and where a page request comes from, for audit records. */
export interface PageRequest {
  requestId: string;
  address: string;
}
