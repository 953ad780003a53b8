import { describe, expect, it } from 'vitest';
import { routes } from '../../generated/routes.js';
import { handlers } from '../../src/operations/index.js';
import type { OperationHandlers } from '../../src/operations/types.js';

describe('operation handlers', () => {
  it('exist for exactly the operations of the contract', () => {
    expect(Object.keys(handlers).sort()).toEqual(routes.map((r) => r.operationId).sort());
  });

  it('are required by the type of the handler table (checked by `npm run typecheck`)', () => {
    const { listUsers: _omitted, ...incomplete } = handlers;
    // @ts-expect-error an operation without a handler does not typecheck
    const table: OperationHandlers = incomplete;
    expect(Object.keys(table)).not.toContain('listUsers');
  });
});
