import { ApiError } from '../errors/registry.js';

export const VENDOR_TYPE = 'application/vnd.portcullis+json';
export const SUPPORTED_VERSIONS = new Set(['1']);
const VENDOR_MENTIONED = /application\/vnd\.portcullis\+json/i;

/**
 * Versioning: `/v1/...`, or the unprefixed path with `Accept: application/vnd.portcullis+json; version=1`.
 * Returns the vendor media type to answer with (echoing the requested version), or null for plain JSON.
 */
export function negotiateVersion(accept: string | undefined, pathVersioned: boolean): string | null {
  if (pathVersioned && (accept === undefined || !VENDOR_MENTIONED.test(accept))) return null;
  const vendor = (accept ?? '')
    .split(',')
    .map((range) => range.trim())
    .find((range) => range.toLowerCase().startsWith(VENDOR_TYPE));
  if (vendor === undefined) {
    if (pathVersioned) return null;
    throw new ApiError('NOT_ACCEPTABLE', `Use a /v1 path or send Accept: ${VENDOR_TYPE}; version=1.`);
  }
  const version = /;\s*version\s*=\s*"?([^";,\s]+)"?/i.exec(vendor)?.[1];
  if (version === undefined) {
    throw new ApiError('NOT_ACCEPTABLE', `The ${VENDOR_TYPE} media type needs a version parameter (version=1).`);
  }
  if (!SUPPORTED_VERSIONS.has(version) || (pathVersioned && version !== '1')) {
    throw new ApiError('NOT_ACCEPTABLE', `API version ${version} is not available; supported: ${[...SUPPORTED_VERSIONS].join(', ')}.`);
  }
  return `${VENDOR_TYPE}; version=${version}`;
}

/**
 * A serialised body as it is handed to Fastify: in the vendor media type it goes as bytes, because Fastify
 * re-renders the media type of a text payload (`version="1"; charset=utf-8`) and the type must be echoed
 * exactly as documented.
 */
export function bodyInMediaType(text: string, mediaType: string | null): string | Buffer {
  return mediaType === null ? text : Buffer.from(text);
}
