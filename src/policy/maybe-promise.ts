/**
 * A result that is synchronous when nothing had to be read, and a promise when something did: the hot
 * path (a cached token, a policy check, a direct SQLite read) is not charged a promise per step.
 */
export type MaybePromise<T> = T | Promise<T>;

/** `fn` applied to the value, at once when it is there, else once it is. */
export function thenMaybe<T, U>(value: MaybePromise<T>, fn: (resolved: T) => MaybePromise<U>): MaybePromise<U> {
  return value instanceof Promise ? value.then(fn) : fn(value);
}
