import sjson from 'secure-json-parse';
import { ApiError } from '../errors/registry.js';
import { foreignCharset, mediaTypeParameters, UTF8 } from '../http/body-encoding.js';
import { SUPPORTED_VERSIONS, VENDOR_TYPE } from './versioning.js';

/**
 * What the body's Content-Type says beyond its type: JSON is UTF-8 (RFC 8259 §8.1), so another charset is
 * a body this server would misread (415); the vendor type's `version`, when given, must be one this server
 * speaks (415, as an unknown version in Accept is a 406).
 */
export function checkBodyMediaType(contentType: string | undefined): void {
  if (contentType === undefined) return;
  const parameters = mediaTypeParameters(contentType);
  const charset = foreignCharset(parameters);
  if (charset !== null) {
    throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `The request body must be UTF-8 JSON; charset=${charset} is not accepted.`);
  }
  const version = parameters.get('version');
  if (version !== undefined && contentType.trim().toLowerCase().startsWith(VENDOR_TYPE) && !SUPPORTED_VERSIONS.has(version)) {
    throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `API version ${version} is not available for request bodies; supported: ${[...SUPPORTED_VERSIONS].join(', ')}.`);
  }
}

/**
 * The JSON body parser (an empty body on a DELETE is no body): like Fastify's, prototype-poisoning keys (`__proto__`, `constructor.prototype`) are
 * refused rather than stripped, and each failure says which of the two it was. Bytes that are not UTF-8
 * are refused too, rather than read as replacement characters that would then be stored.
 */
export function parseJsonBody(
  request: { method: string; headers: Record<string, string | string[] | undefined> },
  body: string | Buffer,
  done: (error: Error | null, value?: unknown) => void,
): void {
  let text: string;
  try {
    checkBodyMediaType(request.headers['content-type'] as string | undefined);
    text = typeof body === 'string' ? body : UTF8.decode(body);
  } catch (error) {
    done(error instanceof ApiError ? error : new ApiError('VALIDATION_FAILED', 'The body is not valid UTF-8.'));
    return;
  }
  if (text.length === 0) {
    // A DELETE has no body here; many HTTP helpers send the JSON Content-Type with every request anyway.
    if (request.method === 'DELETE') {
      done(null, undefined);
      return;
    }
    done(new ApiError('VALIDATION_FAILED', 'The JSON body is empty.'));
    return;
  }
  try {
    done(null, sjson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' }));
  } catch (error) {
    done(
      /forbidden prototype property/i.test((error as Error).message)
        ? new ApiError('VALIDATION_FAILED', 'The body may not use "__proto__" or "constructor.prototype" as property names.')
        : new ApiError('VALIDATION_FAILED', 'The body is not valid JSON.', { details: [{ path: '/body', message: syntaxProblem(text, error as Error) }] }),
    );
  }
}

/**
 * Where the parser gave up, as a line and column of the body (1-based, in characters), without echoing any of
 * it; a body that stops early says so.
 */
function syntaxProblem(text: string, error: Error): string {
  const position = /at position (\d+)/.exec(error.message)?.[1];
  if (position === undefined) return /end of JSON input/i.test(error.message) ? 'the JSON ends before it is complete' : 'not valid JSON';
  const before = text.slice(0, Number(position));
  const line = before.split('\n').length;
  const column = before.length - before.lastIndexOf('\n');
  return `not valid JSON at line ${line}, column ${column}`;
}
