/** RFC 8288 `Link: <...>; rel="next"` for a page that has a successor. */
export function nextLink(url: string, next: string): string {
  const parsed = new URL(url, 'http://internal');
  parsed.searchParams.delete('page');
  parsed.searchParams.set('after', next);
  return `<${parsed.pathname}${parsed.search}>; rel="next"`;
}
