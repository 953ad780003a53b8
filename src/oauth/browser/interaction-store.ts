import type { Kysely } from 'kysely';
import { completeInteraction, findOpenInteraction, insertInteraction, updateInteractionParams } from '../../storage/interactions.js';
import type { Database } from '../../storage/schema.js';
import { digestSecret, generateSecret } from '../secrets.js';
import type { AuthorizationRequest } from '../authorize/authorization-request.js';

/** What the user is in the middle of while signing in and consenting. */
export type InteractionParams =
  | { kind: 'authorize'; request: AuthorizationRequest; /** Set once the user signed in during this interaction. */ signedInAt?: number }
  /** Signing in to enter a device's user code, or to the account page: never stored, the form carries it. */
  | { kind: 'device'; userCode: string }
  | { kind: 'account' };

export interface OpenInteraction {
  /** The id the browser holds (in the page URL and forms). */
  id: string;
  /** The `interactions` row id (digest of the id the browser holds). */
  rowId: string;
  params: InteractionParams;
}

/** Ten minutes to sign in and decide, as long as a device code lives. */
export const INTERACTION_TTL_SECONDS = 600;

/**
 * Interactions are rows, not memory: the user can sign in on one instance and consent on another, or
 * across a restart. The id in the URL is useless in another browser: it must come with the browser cookie
 * it was created for.
 */
export class InteractionStore {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: () => number = Date.now,
  ) {}

  async create(params: InteractionParams, browser: string): Promise<string> {
    const id = generateSecret();
    const now = this.clock();
    await insertInteraction(this.db, {
      id: digestSecret(id),
      browserHash: digestSecret(browser),
      kind: params.kind,
      params: JSON.stringify(params),
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + INTERACTION_TTL_SECONDS * 1000).toISOString(),
      completedAt: null,
    });
    return id;
  }

  async open(id: string | undefined, browser: string | null): Promise<OpenInteraction | null> {
    if (id === undefined || browser === null || !/^[A-Za-z0-9_-]{43}$/.test(id)) return null;
    const row = await findOpenInteraction(this.db, digestSecret(id), new Date(this.clock()).toISOString());
    if (!row || row.browserHash !== digestSecret(browser)) return null;
    return { id, rowId: row.id, params: JSON.parse(row.params) as InteractionParams };
  }

  /** True for exactly one caller: an interaction ends in one code, one device decision. */
  complete(interaction: OpenInteraction): Promise<boolean> {
    return completeInteraction(this.db, interaction.rowId, new Date(this.clock()).toISOString());
  }

  async update(interaction: OpenInteraction, params: InteractionParams): Promise<void> {
    await updateInteractionParams(this.db, interaction.rowId, JSON.stringify(params));
  }
}
