import { runCli } from './run-cli.js';

// `portcullis audit tail | head`: a reader that goes away early is not this command's failure. The stream
// stops being writable, and `audit tail --follow` stops when it sees that.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
});

/** `npm run cli -- <command>` and bin/portcullis.js. The exit code is set, not forced, so output drains. */
process.exitCode = await runCli(process.argv.slice(2));
