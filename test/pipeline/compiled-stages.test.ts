import { describe, expect, it } from 'vitest';
import { compileStages, runStages, type Stage } from '../../src/pipeline/pipeline.js';
import { routes } from '../../generated/routes.js';
import { REST_PIPELINE, stagesFor } from '../../src/rest/rest-pipeline.js';
import type { RouteDefinition } from '../../src/rest/route-definition.js';

type Log = string[];
const ex = () => ({ log: [] as Log }) as never;
const logOf = (exchange: unknown) => (exchange as { log: Log }).log;

/** A stage that logs its name and then returns at once, waits a turn, throws, or rejects. */
function stage(name: string, outcome: 'sync' | 'async' | 'throw' | 'reject' = 'sync'): Stage {
  return {
    name,
    run: (exchange) => {
      logOf(exchange).push(name);
      if (outcome === 'throw') throw new Error(`${name} refused`);
      if (outcome === 'reject') return new Promise((_, reject) => setImmediate(() => reject(new Error(`${name} refused`))));
      if (outcome === 'async') return new Promise((resolve) => setImmediate(resolve));
      return undefined;
    },
  };
}

/** Runs the list both ways and answers what each did: synchronous or not, the stages run, the error. */
async function bothWays(stages: Stage[]) {
  const outcomes = [];
  for (const run of [(e: never, deps: never) => runStages(stages, e, deps), compileStages(stages)]) {
    const exchange = ex();
    let result: unknown;
    let error: unknown = null;
    try {
      result = run(exchange, {} as never);
      if (result instanceof Promise) await result.catch((e: unknown) => (error = e));
    } catch (e) {
      error = e;
    }
    outcomes.push({ synchronous: !(result instanceof Promise), log: logOf(exchange), error: error === null ? null : String(error) });
  }
  return outcomes;
}

describe('stages compiled into one function', () => {
  it.each([
    ['all synchronous', [stage('a'), stage('b'), stage('c')], { synchronous: true, log: ['a', 'b', 'c'], error: null }],
    ['one waits, the rest run after it', [stage('a'), stage('b', 'async'), stage('c'), stage('d', 'async'), stage('e')], { synchronous: false, log: ['a', 'b', 'c', 'd', 'e'], error: null }],
    ['the last one waits', [stage('a'), stage('b', 'async')], { synchronous: false, log: ['a', 'b'], error: null }],
    ['a refusal thrown at once stops the rest', [stage('a'), stage('b', 'throw'), stage('c')], { synchronous: true, log: ['a', 'b'], error: 'Error: b refused' }],
    ['a refusal after a wait stops the rest', [stage('a', 'async'), stage('b', 'reject'), stage('c')], { synchronous: false, log: ['a', 'b'], error: 'Error: b refused' }],
    ['no stages', [], { synchronous: true, log: [], error: null }],
  ] as const)('runs exactly as runStages: %s', async (_, stages, expected) => {
    expect(await bothWays([...stages])).toEqual([expected, expected]);
  });

  it('resolves to nothing, as runStages does, whatever the last stage resolves to', async () => {
    const answering: Stage = { name: 'answering', run: () => Promise.resolve(42) as never };
    await expect(runStages([stage('a'), answering], ex(), {} as never)).resolves.toBeUndefined();
    await expect(compileStages([stage('a'), answering])(ex(), {} as never)).resolves.toBeUndefined();
  });

  it('runs the stages as they were compiled, before and after a wait, even if the list changes later', async () => {
    const first = stage('a', 'async');
    const second = stage('b');
    const run = compileStages([first, second]);
    second.run = stage('replaced').run;
    const exchange = ex();
    await run(exchange, {} as never);
    expect(logOf(exchange)).toEqual(['a', 'b']);
  });

  it('makes no code of a stage name', () => {
    const hostile = { name: '`); process.exit(1); (`', run: () => undefined };
    expect(compileStages([hostile, hostile]).toString()).not.toContain('process');
  });
});

describe("each route's REST stages", () => {
  const route = (operationId: string) => routes.find((r) => r.operationId === operationId) as unknown as RouteDefinition;
  const names = (operationId: string, phase: 'request' | 'body') => stagesFor(route(operationId), phase).map((s) => s.name);
  const every = (phase: 'request' | 'body') => REST_PIPELINE.filter((s) => s.phase === phase).map((s) => s.name);

  it('keeps every request stage for every route', () => {
    for (const r of routes) expect(names(r.operationId, 'request')).toEqual(every('request'));
  });

  it('leaves out of a route only the body stages that could do nothing for it', () => {
    // A GET: no body is ever read; nothing is replaced.
    expect(names('getPost', 'body')).toEqual(['reject-invalid-text', 'validate', 'load-resource']);
    expect(names('listPosts', 'body')).toEqual(['reject-invalid-text', 'validate']);
    // A POST creates: a body, no resource loaded first.
    expect(names('createPost', 'body')).toEqual(['reject-body-token', 'reject-invalid-text', 'check-body-type', 'validate']);
    // PUT and PATCH update a loaded resource under If-Match.
    for (const operationId of ['replacePost', 'updatePost']) expect(names(operationId, 'body')).toEqual(every('body'));
    // A DELETE reads a body (a token in it is still refused) and honours If-Match, but has no body type.
    expect(names('deletePost', 'body')).toEqual(['reject-body-token', 'reject-invalid-text', 'validate', 'load-resource', 'check-precondition']);
  });
});
