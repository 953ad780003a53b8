import fs from 'node:fs';
import path from 'node:path';
import addFormatsModule from 'ajv-formats';
import { OpenAPIBackend, type Document } from 'openapi-backend';
import { PACKAGE_ROOT } from '../src/package-root.js';

const addFormats = addFormatsModule as unknown as (ajv: unknown) => void;

/** The published contract, the document client teams build from. */
export function readPublishedSpec(): Document {
  return JSON.parse(fs.readFileSync(path.join(PACKAGE_ROOT, 'generated/openapi.json'), 'utf8')) as Document;
}

/**
 * openapi-backend over the published contract, with ajv-formats (email, date-time, uri, ...) in its
 * validators. `quick` skips its own check of the document, which knows only OpenAPI 3.0's schema; the
 * contract is OpenAPI 3.1, checked by codegen and linted by Spectral.
 */
export async function contractBackend(): Promise<OpenAPIBackend> {
  const api = new OpenAPIBackend({
    definition: readPublishedSpec(),
    strict: true,
    quick: true,
    customizeAjv: (ajv) => {
      addFormats(ajv);
      return ajv;
    },
  });
  await api.init();
  return api;
}
