/**
 * For a path no route matches with this method: the methods that do exist there (RFC 9110 §15.5.6). Fed
 * from Fastify's `onRoute` hook, so every route counts — the contract's operations and the authorization
 * server's endpoints alike.
 */
export class AllowedMethods {
  readonly #patterns: { method: string; regex: RegExp }[] = [];

  /** A route as Fastify registers it: `:name` parameters, one method or several. */
  add(method: string | readonly string[], url: string): void {
    const source = url
      .split(/(:[A-Za-z0-9_]+)/)
      .map((part) => (part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('');
    const regex = new RegExp(`^${source.replace(/\/$/, '')}/?$`);
    for (const m of typeof method === 'string' ? [method] : method) this.#patterns.push({ method: m, regex });
  }

  for(path: string): string[] {
    const methods = new Set<string>(this.#patterns.filter((p) => p.regex.test(path)).map((p) => p.method));
    if (methods.has('GET')) methods.add('HEAD');
    return [...methods];
  }
}
