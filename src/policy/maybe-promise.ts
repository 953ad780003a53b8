/**
 * A result that is synchronous when nothing had to be read, and a promise when something did: the hot
 * path (a cached token, a policy check, a direct SQLite read) is not charged a promise per step.
 */
export type MaybePromise<T> = T | Promise<T>;
