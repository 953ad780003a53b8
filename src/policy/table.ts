/**
 * The shape of the policy table that codegen compiles from the contracts and policy.yaml
 * (generated/policy.ts). The evaluator in this folder reads only this.
 */
export type Condition =
  | 'owner'
  | { field: string; equals: string | number | boolean }
  | { role: string[] }
  /** The parent's rule for `action` (by default the same action as the one being checked). */
  | { parent: string; via: string; action?: Action }
  /** Every listed condition (a rule itself is any-of). */
  | { all: Condition[] };

export type Action = 'read' | 'update' | 'delete';

export interface ResourcePolicy {
  /** The contract schema the resource is served as (rule fields are checked against it). */
  schema: string;
  /** Field that holds the owner's subject id, for the `owner` condition. */
  owner: string | null;
  rules: Partial<Record<Action, Condition[]>>;
  /** Fields that only the listed roles may change. */
  protectedFields: Record<string, string[]>;
}

export interface ResourceTarget {
  type: string;
  /** Path parameter (REST) or argument (GraphQL) that carries the resource id. */
  param: string;
  action: Action;
}

/** The access rule of one REST operation or one GraphQL root field. */
export interface OperationAccess {
  /** `rest:<operationId>` or `graphql:<Type.field>`. */
  id: string;
  public: boolean;
  /** Any valid token, no particular scope or permission. */
  authenticated: boolean;
  scopes: string[];
  permission: string | null;
  resource: ResourceTarget | null;
  deprecated: boolean;
}

export interface RolePolicy {
  description: string;
  permissions: string[];
}

export interface PolicyTable {
  /** Scope catalogue: name -> description shown at consent. */
  scopes: Record<string, string>;
  permissions: Record<string, string>;
  roles: Record<string, RolePolicy>;
  resources: Record<string, ResourcePolicy>;
  operations: Record<string, OperationAccess>;
  /** GraphQL object types whose every returned object passes a resource's read check. */
  graphqlTypes: Record<string, { scopes: string[]; permission: string | null; resource: string | null }>;
}
