import type { AuditLog } from '../audit/audit-log.js';
import type { DeprecatedUse } from '../deprecations/deprecated-use.js';
import type { GraphqlLimits } from '../limits/graphql-limits.js';
import type { OperationAccess } from '../policy/table.js';
import type { PipelineDeps } from '../pipeline/stages.js';
import type { EventBus } from '../events/event-bus.js';
import type { TrustedDocuments } from './trusted-documents.js';

/** What the GraphQL adapter needs beside the pipeline's stages. */
export interface GraphqlDeps extends PipelineDeps {
  audit: AuditLog;
  limits: GraphqlLimits;
  /** Only these documents run (GRAPHQL_TRUSTED_DOCUMENTS); null: any document. */
  trustedDocuments: TrustedDocuments | null;
  /** GRAPHQL_INTROSPECTION_PUBLIC: introspection without the `read:schema` scope. */
  introspectionPublic: boolean;
  /** `Type.field` -> the root field's access rule, with the resource its REST twin checks when it names none. */
  rootFields: ReadonlyMap<string, OperationAccess>;
  /** Counts uses of deprecated fields per client. */
  deprecatedUse: DeprecatedUse;
  /** Resource events for subscriptions. */
  events: EventBus;
  /** A REST operation's request-body schema (mutations validate their input with it). */
  bodySchemaOf(operationId: string): object | null;
}
