import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The directory of Portcullis's package.json: files read at run time (the published contract, the SDL)
 * are found from it, whether this module runs from src/ or compiled in dist/src/.
 */
function findPackageRoot(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'package.json')) && fs.existsSync(path.join(dir, 'openapi.yaml'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no Portcullis package above ${from}`);
  }
}

export const PACKAGE_ROOT = findPackageRoot(path.dirname(fileURLToPath(import.meta.url)));
