import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { policy } from '../../generated/policy.js';
import { routes } from '../../generated/routes.js';
import { replacementContracts } from '../../src/rest/validation.js';
import { configFrom } from '../../src/config/config.js';
import { ApiError } from '../../src/errors/registry.js';
import { InProcessEventBus } from '../../src/events/event-bus.js';
import { RateLimiter } from '../../src/limits/rate-limit.js';
import { VerifiedTokenCache } from '../../src/oauth/tokens/verified-token-cache.js';
import type { OperationDeps } from '../../src/operations/types.js';
import { resources } from '../../src/resources/registry.js';
import type { Exchange, Transport } from '../../src/pipeline/exchange.js';
import { ACCESS_PIPELINE, runStages } from '../../src/pipeline/pipeline.js';
import { recordDecision } from '../../src/pipeline/record-decision.js';
import type { PipelineDeps } from '../../src/pipeline/stages.js';
import { SubjectDirectory } from '../../src/pipeline/subject-directory.js';
import { ANONYMOUS } from '../../src/policy/principal.js';
import { REST_PIPELINE } from '../../src/rest/rest-pipeline.js';
import { newId } from '../../src/storage/ids.js';
import type { TestApp, TestUser } from '../helpers/app.js';
import { DATABASE_KINDS } from '../helpers/databases.js';
import { createPost, startAccessApp, type PostView } from '../access/support.js';

/**
 * The access stages driven directly, as any adapter drives them: an exchange in, a decision out, and the
 * decision in the audit log under the interface the adapter named. No HTTP request is involved.
 */
describe.each(DATABASE_KINDS)('the transport-neutral access pipeline on %s', (kind) => {
  let t: TestApp;
  let deps: PipelineDeps;
  let author: TestUser;
  let other: TestUser;
  let draft: PostView;

  beforeAll(async () => {
    t = await startAccessApp(kind);
    const db = t.database.db;
    const config = configFrom({ DATA_DIR: t.dataDir, ISSUER: 'http://127.0.0.1:3000', KEY_ENCRYPTION_SECRET: 'test-key-encryption-secret-0123456789abcdef' });
    const operations: OperationDeps = { db: db.kysely, sqlite: db.sqlite, policy, resources, publishedSpec: '{}', graphqlSdl: '', events: new InProcessEventBus(),
      defaultAccessTokenTtl: 600, replacement: replacementContracts(routes), invalidateSubject: () => {} };
    deps = { policy, tokens: t.app.tokens, subjects: new SubjectDirectory(db.kysely), limiter: new RateLimiter(config.rateLimit), operations };
    author = await t.createUser('member');
    other = await t.createUser('member');
    draft = await createPost(t, await author.token(), { title: 'A draft', status: 'draft' });
  });
  afterAll(async () => {
    await t?.close();
  });

  function exchange(transport: Transport, operation: string, token: string | undefined, resourceId?: string): Exchange {
    const access = policy.operations[operation]!;
    return {
      interface: transport,
      operationId: operation.slice(operation.indexOf(':') + 1),
      access,
      resourceId,
      credentials: { authorization: token === undefined ? undefined : `Bearer ${token}`, tokenInQuery: false },
      requestId: `req-${newId()}`,
      sourceAddress: '192.0.2.7',
      principal: ANONYMOUS,
      resource: null,
      rateLimit: null,
      decision: null,
    };
  }

  /** Runs the access stages, then records the decision as an adapter does once it has answered. */
  async function decide(ex: Exchange): Promise<ApiError | null> {
    let refusal: ApiError | null = null;
    try {
      await runStages(ACCESS_PIPELINE, ex, deps);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      refusal = error;
    }
    recordDecision(ex, t.app.audit);
    return refusal;
  }

  async function auditOf(ex: Exchange) {
    return vi.waitFor(
      async () => {
        await t.app.audit.flush();
        const rows = await t.database.db.kysely
          .selectFrom('auditEvents')
          .select(['subject', 'interface', 'operation', 'resourceType', 'resourceId', 'decision', 'reason'])
          .where('requestId', '=', ex.requestId)
          .execute();
        if (rows.length === 0) throw new Error(`no audit event for ${ex.requestId}`);
        return rows;
      },
      { timeout: 2000, interval: 20 },
    );
  }

  it('allows the author to read a draft: the resource is loaded and the decision audited under the interface given', async () => {
    const ex = exchange('graphql', 'graphql:Query.post', await author.token(['read:posts']), draft.id);
    expect(await decide(ex)).toBeNull();
    expect(ex.principal).toMatchObject({ kind: 'user', subject: author.id, role: 'member' });
    expect(ex.resource).toMatchObject({ id: draft.id, authorId: author.id, status: 'draft' });
    expect(ex.rateLimit).toMatchObject({ allowed: true });
    expect(await auditOf(ex)).toEqual([
      { subject: author.id, interface: 'graphql', operation: 'Query.post', resourceType: 'post', resourceId: draft.id, decision: 'allow', reason: 'resource' },
    ]);
  });

  it('refuses a token without the scope with INSUFFICIENT_SCOPE, before the resource is read', async () => {
    const ex = exchange('graphql', 'graphql:Query.post', await author.token(['read:users']), draft.id);
    const refusal = await decide(ex);
    expect({ code: refusal?.code, status: refusal?.status }).toEqual({ code: 'INSUFFICIENT_SCOPE', status: 403 });
    expect(ex.resource).toBeNull();
    expect(await auditOf(ex)).toEqual([
      { subject: author.id, interface: 'graphql', operation: 'Query.post', resourceType: 'post', resourceId: draft.id, decision: 'deny', reason: 'scope' },
    ]);
  });

  it('refuses a role without the permission with FORBIDDEN (default deny)', async () => {
    const ex = exchange('rest', 'rest:listAuditEvents', await author.token(['read:audit']));
    const refusal = await decide(ex);
    expect({ code: refusal?.code, status: refusal?.status }).toEqual({ code: 'FORBIDDEN', status: 403 });
    expect(await auditOf(ex)).toEqual([
      { subject: author.id, interface: 'rest', operation: 'listAuditEvents', resourceType: null, resourceId: null, decision: 'deny', reason: 'role' },
    ]);
  });

  it("answers someone else's draft exactly like a missing post: NOT_FOUND, audited as a resource denial", async () => {
    const token = await other.token(['read:posts']);
    const hidden = exchange('graphql', 'graphql:Query.post', token, draft.id);
    const missing = exchange('graphql', 'graphql:Query.post', token, newId());
    const [hiddenRefusal, missingRefusal] = [await decide(hidden), await decide(missing)];
    expect(hiddenRefusal).toBeInstanceOf(ApiError);
    expect({ code: hiddenRefusal?.code, status: hiddenRefusal?.status, message: hiddenRefusal?.message }).toEqual({
      code: 'NOT_FOUND',
      status: 404,
      message: missingRefusal?.message,
    });
    expect(missingRefusal?.code).toBe('NOT_FOUND');
    expect(hidden.resource).toBeNull();
    expect(await auditOf(hidden)).toEqual([
      { subject: other.id, interface: 'graphql', operation: 'Query.post', resourceType: 'post', resourceId: draft.id, decision: 'deny', reason: 'resource' },
    ]);
    expect(await auditOf(missing)).toEqual([
      { subject: other.id, interface: 'graphql', operation: 'Query.post', resourceType: 'post', resourceId: missing.resourceId, decision: 'deny', reason: 'resource' },
    ]);
  });

  it('refuses a token it cannot verify with UNAUTHENTICATED, decided as an authentication denial', async () => {
    const ex = exchange('graphql', 'graphql:Query.post', 'not-a-real-token', draft.id);
    const refusal = await decide(ex);
    expect({ code: refusal?.code, status: refusal?.status }).toEqual({ code: 'UNAUTHENTICATED', status: 401 });
    expect(ex.decision).toEqual({ decision: 'deny', reason: 'authentication' });
    expect(ex.principal).toBe(ANONYMOUS);
  });

  it('decides a token verified before with one look into the token cache and no address budget spent', async () => {
    const token = await author.token(['read:posts']);
    expect(await decide(exchange('rest', 'rest:getPost', token, draft.id))).toBeNull();
    const lookups = vi.spyOn(VerifiedTokenCache.prototype, 'get');
    const checks = vi.spyOn(VerifiedTokenCache.prototype, 'has');
    const addressBudget = vi.spyOn(deps.limiter.address, 'take');
    const verify = vi.spyOn(deps.tokens, 'verifyAccessToken');
    try {
      const ex = exchange('rest', 'rest:getPost', token, draft.id);
      await runStages(ACCESS_PIPELINE, ex, deps);
      expect(ex.principal).toMatchObject({ kind: 'user', subject: author.id, role: 'member' });
      expect(ex.decision).toEqual({ decision: 'allow', reason: 'resource' });
      expect(lookups).toHaveBeenCalledTimes(1);
      expect(lookups).toHaveBeenCalledWith(token);
      expect(checks).not.toHaveBeenCalled();
      expect(addressBudget).not.toHaveBeenCalled();
      expect(verify).not.toHaveBeenCalled();
      recordDecision(ex, t.app.audit);
      expect(await auditOf(ex)).toEqual([
        { subject: author.id, interface: 'rest', operation: 'getPost', resourceType: 'post', resourceId: draft.id, decision: 'allow', reason: 'resource' },
      ]);
    } finally {
      lookups.mockRestore();
      checks.mockRestore();
      addressBudget.mockRestore();
      verify.mockRestore();
    }
  });

  it('spends the address budget for a token not verified before, then verifies it (one refusal counted once)', async () => {
    const addressBudget = vi.spyOn(deps.limiter.address, 'take');
    const anonymousBudget = vi.spyOn(deps.limiter.anonymous, 'take');
    const verify = vi.spyOn(deps.tokens, 'verifyAccessToken');
    try {
      const ex = exchange('rest', 'rest:getPost', `forged-${newId()}`, draft.id);
      const refusal = await decide(ex);
      expect({ code: refusal?.code, status: refusal?.status }).toEqual({ code: 'UNAUTHENTICATED', status: 401 });
      expect(addressBudget).toHaveBeenCalledTimes(1);
      expect(anonymousBudget).toHaveBeenCalledTimes(1);
      expect(verify).toHaveBeenCalledTimes(1);
    } finally {
      addressBudget.mockRestore();
      anonymousBudget.mockRestore();
      verify.mockRestore();
    }
  });
});

describe('the REST pipeline', () => {
  it('runs the access stages, the same functions, in the order the pipeline states', () => {
    const access = new Set(ACCESS_PIPELINE.map((stage) => stage.run));
    const inRest = REST_PIPELINE.filter((stage) => access.has(stage.run as never)).map(({ name, run }) => ({ name, run }));
    expect(inRest).toEqual(ACCESS_PIPELINE.map(({ name, run }) => ({ name, run })));
  });
});
