// Throwaway helper: reproduces codegen's "published spec" step so the contract can be linted before
// codegen.ts exists. Usage: node scripts/publish-preview.mjs [in=openapi.yaml] [out=/tmp/openapi.published.json]
import { readFileSync, writeFileSync } from 'node:fs';
import { parse } from 'yaml';

const [input = 'openapi.yaml', output = '/tmp/openapi.published.json'] = process.argv.slice(2);
const doc = parse(readFileSync(input, 'utf8'));
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

for (const [path, item] of Object.entries(doc.paths ?? {})) {
  for (const method of METHODS) {
    const op = item[method];
    if (!op) continue;
    const where = `${method.toUpperCase()} ${path}`;
    if (op.security !== undefined) throw new Error(`${where}: security must not be written in openapi.yaml`);
    if (!Array.isArray(op['x-scopes'])) throw new Error(`${where}: x-scopes is required`);
    if (op['x-public'] === true) op.security = [];
    else op.security = [{ oauth2: op['x-scopes'] }];
  }
}
if (doc.security !== undefined) throw new Error('top-level security must not be written in openapi.yaml');
writeFileSync(output, JSON.stringify(doc, null, 2) + '\n');
console.log(`wrote ${output}`);
