/**
 * Every write the servers acknowledged: the post each 201 (or GraphQL createPost) returned, and its title as
 * the last acknowledged PATCH left it. Only the loop that created a post changes it, one request at a time,
 * so the last acknowledged title is the one the post must have afterwards.
 */
export class Writes {
  readonly titles = new Map<string, string>();
  readonly ids: string[] = [];
  creates = 0;
  patches = 0;
  /** A repeated Idempotency-Key answered with another post, or without `Idempotent-Replayed`. */
  replayMismatches = 0;
  replays = 0;

  created(id: string, title: string): void {
    this.creates++;
    if (this.titles.has(id)) return;
    this.titles.set(id, title);
    this.ids.push(id);
  }

  patched(id: string, title: string): void {
    this.patches++;
    this.titles.set(id, title);
  }

  /** A post some request created, for reads. */
  pick(random: () => number): string | undefined {
    return this.ids.length === 0 ? undefined : this.ids[Math.floor(random() * this.ids.length)];
  }
}
