/** RFC 6901 §3: `~` and `/` inside a property name are escaped, so the pointer stays unambiguous. */
export function pointerToken(name: string): string {
  return name.replace(/~/g, '~0').replace(/\//g, '~1');
}
