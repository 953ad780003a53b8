/**
 * The trace id of a W3C Trace Context `traceparent` header (`00-<trace-id>-<parent-id>-<flags>`), or null
 * when the header is absent or not one a tracer may continue (Trace Context §3.2: lower-case hex, neither
 * id all zeros, version `ff` invalid, a later version read by its first four fields).
 */
export function traceIdOf(header: string | string[] | undefined): string | null {
  if (typeof header !== 'string') return null;
  const match = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/.exec(header.trim());
  if (!match) return null;
  const [, version, traceId, parentId, , rest] = match;
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (/^0+$/.test(traceId!) || /^0+$/.test(parentId!)) return null;
  return traceId!;
}
