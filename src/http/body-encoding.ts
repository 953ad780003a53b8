/**
 * What the API accepts as text: UTF-8 only (JSON, RFC 8259 §8.1; forms, RFC 6749 Appendix B). Shared by the
 * REST body parser, the token endpoint's form parser and Basic client credentials.
 */

/** Decodes UTF-8, throwing on any byte sequence that is not UTF-8 (no replacement characters). */
export const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** `; name=value` parameters of a media type, names lower-cased, quotes removed. */
export function mediaTypeParameters(contentType: string): Map<string, string> {
  const parameters = new Map<string, string>();
  for (const part of contentType.split(';').slice(1)) {
    const eq = part.indexOf('=');
    if (eq === -1) continue;
    const value = part.slice(eq + 1).trim();
    const name = part.slice(0, eq).trim().toLowerCase();
    const unquoted = value.startsWith('"') && value.endsWith('"') ? value.slice(1, -1) : value;
    // A parameter given twice with two values means neither: the value is one no check accepts.
    const previous = parameters.get(name);
    parameters.set(name, previous === undefined || previous.toLowerCase() === unquoted.toLowerCase() ? unquoted : `${previous}, ${unquoted}`);
  }
  return parameters;
}

/** The charset a body declares when it is not UTF-8 (to be refused with 415), else null. */
export function foreignCharset(parameters: ReadonlyMap<string, string>): string | null {
  const charset = parameters.get('charset');
  return charset !== undefined && charset.toLowerCase() !== 'utf-8' ? charset : null;
}
