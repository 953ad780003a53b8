import type { RouteDefinition } from './route-definition.js';

/** For a path no route matches with this method: the methods that do exist there (RFC 9110 §15.5.6). */
export function allowedMethodsFinder(routes: readonly RouteDefinition[]) {
  const patterns = routes.flatMap((route) =>
    [route.path, route.unversionedUrl.replace(/:([A-Za-z0-9_]+)/g, '{$1}')].map((template) => ({
      method: route.method,
      regex: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{[^}]+\\?\}|\{[^}]+\}/g, '[^/]+')}/?$`),
    })),
  );
  return (path: string): string[] => {
    const methods = new Set<string>(patterns.filter((p) => p.regex.test(path)).map((p) => p.method));
    if (methods.has('GET')) methods.add('HEAD');
    return [...methods];
  };
}
