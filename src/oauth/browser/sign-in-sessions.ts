import type { Kysely } from 'kysely';
import { findLiveLoginSession, insertLoginSession, revokeLoginSession } from '../../storage/login-sessions.js';
import { lockUser } from '../../storage/row-locks.js';
import { writeTransaction } from '../../storage/write-transaction.js';
import type { Database } from '../../storage/schema.js';
import { findUserById, type UserRecord } from '../../storage/users.js';
import { digestSecret, generateSecret } from '../secrets.js';
import { readCookie, serializeCookie, expireCookie, type CookieJar } from './cookies.js';

export interface SignedIn {
  /** The `login_sessions` id (digest of the cookie). */
  sessionId: string;
  user: UserRecord;
  /** Epoch seconds of the sign-in (OpenID Connect `auth_time`). */
  authTime: number;
}

/**
 * Sign-in sessions of the authorization server's pages. The cookie holds 256 random bits; the database
 * holds their digest, so a leaked table signs nobody in, and a session is ended on every instance by one
 * update. A deactivated user's session is no session.
 */
export interface StartedSession {
  sessionId: string;
  setCookie: string;
  authTime: number;
}

export class SignInSessions {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly jar: CookieJar,
    private readonly ttlSeconds: number,
    private readonly clock: () => number = Date.now,
  ) {}

  async current(cookieHeader: string | undefined): Promise<SignedIn | null> {
    const value = readCookie(cookieHeader, this.jar.session);
    if (value === null) return null;
    const row = await findLiveLoginSession(this.db, digestSecret(value), new Date(this.clock()).toISOString());
    if (!row) return null;
    const user = await findUserById(this.db, row.userId);
    if (!user || !user.active) return null;
    return { sessionId: row.id, user, authTime: Math.floor(Date.parse(row.authTime) / 1000) };
  }

  /** A new session (never a reused id: no session fixation) and the Set-Cookie that carries it. */
  start(userId: string): Promise<StartedSession> {
    return this.startWithin(this.db, userId);
  }

  /** `start`, in the caller's write transaction: one that holds the user's lock and has checked the user. */
  async startWithin(trx: Kysely<Database>, userId: string): Promise<StartedSession> {
    const started = this.#session(userId);
    await insertLoginSession(trx, started.row);
    return started.session;
  }

  /**
   * A session for a user whose password was just checked, stored under the user's lock only if the user
   * is still active and unchanged since (`checkedUpdatedAt`, the row's `updatedAt` the check read): a
   * password change that committed while the hash was being checked ends the sessions it sees under the
   * same lock (revokeUserTokens), so a session the old password opened must not be stored after it. Null
   * when the user changed.
   */
  async startAfterPasswordCheck(userId: string, checkedUpdatedAt: string): Promise<StartedSession | null> {
    const started = this.#session(userId);
    const stored = await writeTransaction(this.db, async (trx) => {
      const user = await lockUser(trx, userId);
      if (!user || !user.active || user.updatedAt !== checkedUpdatedAt) return false;
      await insertLoginSession(trx, started.row);
      return true;
    });
    return stored ? started.session : null;
  }

  #session(userId: string) {
    const value = generateSecret();
    const now = this.clock();
    const sessionId = digestSecret(value);
    const row = {
      id: sessionId,
      userId,
      authTime: new Date(now).toISOString(),
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + this.ttlSeconds * 1000).toISOString(),
      revokedAt: null,
    };
    const session: StartedSession = { sessionId, setCookie: serializeCookie(this.jar, this.jar.session, value, this.ttlSeconds), authTime: Math.floor(now / 1000) };
    return { row, session };
  }

  /** Ends the session in the database and returns the Set-Cookie that clears it from the browser. */
  async end(sessionId: string | null): Promise<string> {
    if (sessionId !== null) await revokeLoginSession(this.db, sessionId, new Date(this.clock()).toISOString());
    return expireCookie(this.jar, this.jar.session);
  }
}

/**
 * In a write transaction, before it stores what a signed-in user granted (a code, a device approval): takes
 * the user's lock (storage/row-locks.ts) and checks that the session is still live and the user active.
 * Signing out everywhere or changing the password ends the sessions and the pending grants under the same
 * lock, so a grant stored after it is refused here and one stored before it is ended by it.
 */
export async function lockSignedIn(trx: Kysely<Database>, signedIn: SignedIn, now: number): Promise<boolean> {
  const user = await lockUser(trx, signedIn.user.id);
  if (!user || !user.active) return false;
  return (await findLiveLoginSession(trx, signedIn.sessionId, new Date(now).toISOString())) !== null;
}

export interface BrowserBinding {
  /** The binding the browser presented, or a new one (sent in `setCookie` only where it may be set). */
  browser: string;
  /** Whether the browser presented it: forms and interactions verify only against a presented binding. */
  presented: boolean;
  /** The Set-Cookie carrying a new binding, or null. */
  setCookie: string | null;
}

/**
 * The browser-binding cookie, set only when the browser has none — which a server can tell only from a
 * request that would carry it. The cookie is SameSite=Lax: a top-level GET carries it from any site, a
 * cross-site form post does not. Answering such a post with a new binding would replace the one the
 * browser has, and with it every form and interaction in progress in its other tabs: an attacker's page
 * could do that at will. So only a GET (or HEAD) gets a new binding; a post without one gets none, and
 * its forms do not verify. A sign-in starts a new session, never a new binding, for the same reason.
 */
export function browserBinding(jar: CookieJar, cookieHeader: string | undefined, method: string): BrowserBinding {
  const existing = readCookie(cookieHeader, jar.browser);
  if (existing !== null) return { browser: existing, presented: true, setCookie: null };
  const browser = generateSecret();
  const safe = method === 'GET' || method === 'HEAD';
  return { browser, presented: false, setCookie: safe ? serializeCookie(jar, jar.browser, browser, null) : null };
}
