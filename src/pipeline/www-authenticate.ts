/** RFC 6750 §3 challenges. */
const REALM = 'realm="portcullis"';

export function bearerChallenge(error?: 'invalid_request' | 'invalid_token' | 'insufficient_scope', extra: Record<string, string> = {}): string {
  const params = [REALM];
  if (error) params.push(`error="${error}"`);
  for (const [name, value] of Object.entries(extra)) params.push(`${name}="${value.replace(/["\\]/g, '')}"`);
  return `Bearer ${params.join(', ')}`;
}
