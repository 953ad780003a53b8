import sjson from 'secure-json-parse';
import { ApiError } from '../errors/registry.js';

/**
 * The JSON body parser: like Fastify's, prototype-poisoning keys (`__proto__`, `constructor.prototype`) are
 * refused rather than stripped, and each failure says which of the two it was.
 */
export function parseJsonBody(_request: unknown, body: string | Buffer, done: (error: Error | null, value?: unknown) => void): void {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  if (text.length === 0) {
    done(new ApiError('VALIDATION_FAILED', 'The JSON body is empty.'));
    return;
  }
  try {
    done(null, sjson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' }));
  } catch (error) {
    done(
      /forbidden prototype property/i.test((error as Error).message)
        ? new ApiError('VALIDATION_FAILED', 'The body may not use "__proto__" or "constructor.prototype" as property names.')
        : new ApiError('VALIDATION_FAILED', 'The body is not valid JSON.'),
    );
  }
}
