import { describe, expect, it } from 'vitest';
import { sharedSchemas } from '../../generated/routes.js';
import { serializerFor } from '../../src/rest/serialization.js';

describe('response serialisers with shared schemas', () => {
  const serializeError = serializerFor({ $ref: 'Error#' });

  it('renders an error through the referenced Error schema, dropping what the contract does not declare', () => {
    const body = {
      error: { code: 'VALIDATION_FAILED', message: 'The request does not match the contract.', details: [{ path: '/body/title', message: 'is required', hint: 'x' }], stack: 'at x' },
      debug: true,
    };
    expect(JSON.parse(serializeError(body))).toEqual({
      error: { code: 'VALIDATION_FAILED', message: 'The request does not match the contract.', details: [{ path: '/body/title', message: 'is required' }] },
    });
  });

  it('renders exactly what the inline copy of the schema renders', () => {
    const { $id: _id, ...inline } = sharedSchemas.find((schema) => schema.$id === 'Error')!;
    const body = { error: { code: 'NOT_FOUND', message: 'The resource does not exist.' } };
    expect(serializeError(body)).toBe(serializerFor(inline)(body));
    expect(serializeError(body)).toBe('{"error":{"code":"NOT_FOUND","message":"The resource does not exist."}}');
  });

  it('passes a code added after this release through unchanged (the set of codes is extensible)', () => {
    expect(serializeError({ error: { code: 'SOMETHING_NEW', message: 'Later.' } })).toBe('{"error":{"code":"SOMETHING_NEW","message":"Later."}}');
  });
});
