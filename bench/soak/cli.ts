import { execFile } from 'node:child_process';

/** The operator's CLI (`node bin/portcullis.js`), on the run's database; its `--json` output parsed. */
export function runCli(args: readonly string[], env: Record<string, string>): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['bin/portcullis.js', ...args, '--json'], { env: { PATH: process.env.PATH ?? '', ...env } }, (error, stdout, stderr) => {
      if (error && (error as { code?: unknown }).code !== 1) return reject(new Error(`portcullis ${args.join(' ')}: ${stderr || error.message}`));
      try {
        resolve(JSON.parse(stdout) as Record<string, unknown>);
      } catch {
        reject(new Error(`portcullis ${args.join(' ')} printed no JSON: ${stdout}${stderr}`));
      }
    });
  });
}
