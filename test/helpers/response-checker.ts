import type { OpenAPIBackend, Operation } from 'openapi-backend';
import type { Middleware } from 'openapi-fetch';

/**
 * Checks every response a typed client receives against the published contract with openapi-backend: the
 * status must be one the operation declares, the body must match that response's schema (or be of a declared
 * media type), and the headers must match the declared headers. What was seen and what failed are kept for the
 * test to assert on.
 */
export class ResponseChecker {
  readonly problems: string[] = [];
  /** operationId -> the statuses received, in order. */
  readonly seen = new Map<string, number[]>();

  constructor(private readonly api: OpenAPIBackend) {}

  readonly middleware: Middleware = {
    onResponse: async ({ request, response, schemaPath }) => {
      const operation = this.api.router.getOperations().find((op) => op.path === schemaPath && op.method.toUpperCase() === request.method);
      if (!operation) {
        this.problems.push(`${request.method} ${schemaPath}: no such operation in the contract`);
        return undefined;
      }
      await this.check(operation, response);
      return undefined;
    },
  };

  async check(operation: Operation, response: Response): Promise<void> {
    const id = operation.operationId!;
    const status = response.status;
    this.seen.set(id, [...(this.seen.get(id) ?? []), status]);
    const where = `${id} ${status}`;
    const declared = operation.responses?.[String(status)] as { content?: Record<string, unknown> } | undefined;
    if (!declared) {
      this.problems.push(`${where}: status not declared by the contract`);
      return;
    }
    const headers = Object.fromEntries(response.headers);
    const headerErrors = this.api.validator.validateResponseHeaders(headers, operation, { statusCode: status }).errors;
    if (headerErrors) this.problems.push(`${where}: headers ${JSON.stringify(headerErrors)}`);
    // 204 and 304 declare no content, and fetch gives them none.
    if (!declared.content) return;
    const text = await response.clone().text();
    const mediaType = (response.headers.get('content-type') ?? '').split(';', 1)[0]!.trim();
    if (!(mediaType in declared.content) && !(mediaType === 'application/vnd.portcullis+json' && 'application/json' in declared.content)) {
      this.problems.push(`${where}: media type ${mediaType} not declared (${Object.keys(declared.content).join(', ')})`);
      return;
    }
    const body = mediaType.endsWith('json') ? JSON.parse(text) : text;
    const bodyErrors = this.api.validator.validateResponse(body, operation, status).errors;
    if (bodyErrors) this.problems.push(`${where}: body ${JSON.stringify(bodyErrors)}`);
  }
}
