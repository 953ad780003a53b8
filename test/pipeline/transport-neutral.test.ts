import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = path.resolve(import.meta.dirname, '../../src');
const PIPELINE = path.join(SRC, 'pipeline');

// Static imports and re-exports (`import type` included), side-effect imports and dynamic import().
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm;

/** What a pipeline file may not name: an adapter, or the HTTP framework and server types they wrap. */
function forbidden(specifier: string, resolved: string | null): string | null {
  if (resolved !== null) {
    const relative = path.relative(SRC, resolved).split(path.sep);
    if (relative[0] === 'rest' || relative[0] === 'graphql') return `src/${relative[0]}/`;
    return null;
  }
  const name = specifier.replace(/^node:/, '');
  if (/^(fastify|@fastify\/|mercurius|graphql-ws)/.test(name)) return specifier;
  if (/^(http|https|http2|net)(\/|$)/.test(name)) return specifier;
  return null;
}

function importsOf(file: string): { specifier: string; resolved: string | null }[] {
  const text = fs.readFileSync(file, 'utf8');
  return [...text.matchAll(SPECIFIER)].map(([, specifier]) => ({
    specifier: specifier!,
    resolved: specifier!.startsWith('.') ? path.resolve(path.dirname(file), specifier!.replace(/\.js$/, '.ts')) : null,
  }));
}

function sourceFiles(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

describe('src/pipeline/ is transport-neutral', () => {
  const files = sourceFiles(PIPELINE);

  it('has files to check, and the check sees imports of every form', () => {
    expect(files.length).toBeGreaterThan(3);
    const sample = [
      "import type { FastifyRequest } from 'fastify';",
      "import { x } from '../rest/plugin.js';",
      "export { y } from '../graphql/context.js';",
      "const m = await import('mercurius');",
      "import 'node:http';",
    ].join('\n');
    expect([...sample.matchAll(SPECIFIER)].map((match) => match[1])).toEqual([
      'fastify',
      '../rest/plugin.js',
      '../graphql/context.js',
      'mercurius',
      'node:http',
    ]);
    expect(forbidden('fastify', null)).toBe('fastify');
    expect(forbidden('node:http', null)).toBe('node:http');
    expect(forbidden('../rest/plugin.js', path.join(SRC, 'rest/plugin.ts'))).toBe('src/rest/');
    expect(forbidden('../policy/table.js', path.join(SRC, 'policy/table.ts'))).toBeNull();
  });

  it('imports neither an adapter (src/rest/, src/graphql/) nor Fastify, Mercurius or node:http', () => {
    const violations = files.flatMap((file) =>
      importsOf(file)
        .map(({ specifier, resolved }) => ({ file: path.relative(SRC, file), specifier, rule: forbidden(specifier, resolved) }))
        .filter((found) => found.rule !== null),
    );
    expect(violations).toEqual([]);
  });

  it('reaches no adapter through the modules it imports either', () => {
    const seen = new Set<string>();
    const reached: string[] = [];
    const pending = [...files];
    while (pending.length > 0) {
      const file = pending.pop()!;
      if (seen.has(file) || !fs.existsSync(file)) continue;
      seen.add(file);
      for (const { specifier, resolved } of importsOf(file)) {
        if (resolved === null) continue;
        if (forbidden(specifier, resolved) !== null) reached.push(`${path.relative(SRC, file)} -> ${specifier}`);
        else if (resolved.startsWith(SRC)) pending.push(resolved);
      }
    }
    expect(seen.size).toBeGreaterThan(files.length);
    expect(reached).toEqual([]);
  });
});
