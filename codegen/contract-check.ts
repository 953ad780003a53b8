/**
 * `npm run contract:check`: compares openapi.yaml, policy.yaml and schema.graphql with the contract last
 * released (contracts/released/, written by `npm run contract:release`) and fails on a change that breaks a
 * client generated from the released one (contract-diff.ts lists what counts). A weaker access rule is
 * printed for the reviewer without failing; an element removed after the Sunset date the released
 * contract announced is allowed.
 *
 * `npm run contract:release`: records the current contract as the released one (commit the result).
 */
import fs from 'node:fs';
import path from 'node:path';
import { compileContracts, readSources } from './compile-contracts.js';
import { diffContracts, type ContractChange } from './contract-diff.js';
import { ContractError } from './problems.js';

const RELEASED = 'contracts/released';
const FILES = ['openapi.yaml', 'policy.yaml', 'schema.graphql'];

if (process.argv.includes('--release')) {
  fs.mkdirSync(RELEASED, { recursive: true });
  for (const file of FILES) fs.copyFileSync(file, path.join(RELEASED, file));
  console.log(`Released: ${FILES.map((file) => path.join(RELEASED, file)).join(', ')}. Commit them with the change.`);
  process.exit(0);
}

if (!FILES.every((file) => fs.existsSync(path.join(RELEASED, file)))) {
  console.error(`No released contract under ${RELEASED}/: run \`npm run contract:release\` once and commit it.`);
  process.exit(1);
}

/** Compiled as codegen compiles it; a contract codegen would refuse is reported as codegen reports it. */
function compiled(sources: ReturnType<typeof readSources>, which: string): ReturnType<typeof compileContracts> {
  try {
    return compileContracts(sources);
  } catch (error) {
    if (!(error instanceof ContractError)) throw error;
    console.error(`${which} does not compile, so it cannot be compared: ${error.message}`);
    console.error('Fix it first (the REST body and its GraphQL input change together: see "Codegen" in the README).');
    process.exit(1);
  }
}

const released = readSources(RELEASED);
const current = readSources();
const changes = await diffContracts(
  { compiled: compiled(released, `The released contract (${RELEASED}/)`), schema: released.schema },
  { compiled: compiled(current, 'The contract'), schema: current.schema },
);

const sections: [ContractChange['kind'], string][] = [
  ['breaking', 'Breaking changes (a client of the released contract would fail):'],
  ['access', 'Weaker access rules (check that this is intended):'],
  ['retired', 'Removed after their Sunset date:'],
];
for (const [kind, title] of sections) {
  const listed = changes.filter((change) => change.kind === kind);
  if (listed.length === 0) continue;
  console.log(`\n${title}`);
  for (const change of listed) console.log(`  ${change.where}: ${change.message}`);
}
const breaking = changes.filter((change) => change.kind === 'breaking').length;
if (breaking > 0) {
  console.error(
    `\n${breaking} breaking change(s) against ${RELEASED}/. Keep the released elements (add, do not change), or deprecate them with a Sunset date and remove them after it.`,
  );
  process.exit(1);
}
console.log(changes.length === 0 ? 'The contract is compatible with the released one.' : '\nNo breaking change against the released contract.');
