import fs from 'node:fs';
import path from 'node:path';

/**
 * afterAllFileWrite hook (it also runs under --check, with every output's path): fails when generated/ holds a
 * file that codegen.ts does not produce, since only codegen writes generated/.
 */
export function rejectUnknownOutputs(...outputs: string[]): void {
  const dirs = new Set(outputs.map((file) => path.dirname(path.resolve(file))));
  const expected = new Set(outputs.map((file) => path.resolve(file)));
  const unknown = [...dirs].flatMap((dir) =>
    fs.readdirSync(dir).map((name) => path.join(dir, name)).filter((file) => !expected.has(file)),
  );
  if (unknown.length > 0) {
    const names = unknown.map((file) => path.relative(process.cwd(), file)).join(', ');
    const message = `${names}: not produced by codegen.ts; delete it, or add it to codegen.ts's generates`;
    console.error(message);
    throw new Error(message);
  }
}
