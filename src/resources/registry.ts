import type { PolicyTable } from '../policy/table.js';
import { clients } from './clients.js';
import { comments } from './comments.js';
import { posts } from './posts.js';
import type { ResourceModule } from './resource-module.js';
import { users } from './users.js';

/** The resource modules an API serves, by policy type: what the pipeline, loaders and lists look types up in. */
export class ResourceRegistry {
  private readonly byType: ReadonlyMap<string, ResourceModule<unknown>>;

  constructor(modules: readonly ResourceModule<unknown>[]) {
    this.byType = new Map(modules.map((module) => [module.type, module]));
  }

  get(type: string): ResourceModule<unknown> {
    const module = this.byType.get(type);
    if (!module) throw new Error(`no resource module for resource type "${type}"`);
    return module;
  }

  /** The table a type lives in (the `{ parent, via }` sub-selects of list filters need it). */
  readonly tableOf = (type: string): string => this.get(type).table.name;

  /** The modules whose resources are deleted with a resource of this type. */
  deletedWith(type: string): ResourceModule<unknown>[] {
    return [...this.byType.values()].filter((module) => module.deletedWith?.type === type);
  }

  types(): string[] {
    return [...this.byType.keys()];
  }

  /** This registry and more modules (an API whose contract declares more resource types). */
  with(...modules: ResourceModule<unknown>[]): ResourceRegistry {
    return new ResourceRegistry([...this.byType.values(), ...modules]);
  }

  /**
   * Fails unless every resource type of the policy has a module and every module a policy type, and every
   * expansion and deletion names a type of this registry: checked once when an app is built.
   */
  check(policy: PolicyTable): void {
    const declared = Object.keys(policy.resources).sort();
    const served = this.types().sort();
    if (declared.join() !== served.join()) {
      throw new Error(`policy resource types (${declared.join(', ')}) and resource modules (${served.join(', ')}) differ`);
    }
    for (const module of this.byType.values()) {
      for (const related of [...Object.values(module.expansions), ...(module.deletedWith ? [module.deletedWith] : [])]) this.get(related.type);
    }
  }
}

/** Every resource type of the contract, one module each. */
export const resources = new ResourceRegistry([users, posts, comments, clients]);
