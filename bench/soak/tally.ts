/** What the soak sends, each a row of its summary. */
export const KINDS = [
  'token (client credentials)',
  'REST GET /v1/posts',
  'REST GET /v1/posts/{id}',
  'REST POST /v1/posts',
  'REST POST, Idempotency-Key repeated',
  'REST PATCH /v1/posts/{id}',
  'GraphQL posts(first: 10)',
  'GraphQL post(id)',
  'GraphQL createPost',
  'read-back GET /v1/posts/{id}',
] as const;
export type Kind = (typeof KINDS)[number];

export const STATUS_CLASSES = ['2xx', '3xx', '4xx', '5xx', 'no answer'] as const;
export type StatusClass = (typeof STATUS_CLASSES)[number];

interface Row {
  byInstance: Map<string, number>;
  byClass: Record<StatusClass, number>;
  /** 429s among the 4xx: the limits are set so that the load is never refused. */
  rateLimited: number;
  latencies: number[];
}

/**
 * Every request the soak sent with the load's credentials: counted by kind, instance and status class, its
 * latency kept, and — when it was answered as expected — the authorization decisions its request id should
 * have left in the audit log. Answers that are not what the request expects are failures, with a few kept
 * as examples.
 */
export class Tally {
  readonly rows = new Map<Kind, Row>(KINDS.map((kind) => [kind, { byInstance: new Map(), byClass: { '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0, 'no answer': 0 }, rateLimited: 0, latencies: [] }]));
  /** Request id -> decisions the server should have recorded for it. */
  readonly decisions = new Map<string, number>();
  /** Expected answers that carried no request id (none should). */
  withoutRequestId = 0;
  unexpected = 0;
  readonly examples: string[] = [];

  answered(kind: Kind, instance: string, status: number, ms: number): void {
    const row = this.rows.get(kind)!;
    row.byInstance.set(instance, (row.byInstance.get(instance) ?? 0) + 1);
    row.byClass[statusClass(status)]++;
    if (status === 429) row.rateLimited++;
    row.latencies.push(ms);
  }

  noAnswer(kind: Kind, instance: string, message: string): void {
    const row = this.rows.get(kind)!;
    row.byInstance.set(instance, (row.byInstance.get(instance) ?? 0) + 1);
    row.byClass['no answer']++;
    this.#example(`${kind} on ${instance}: no answer (${message})`);
  }

  /** An answer as expected: its request id owes the audit log `decisions` events. */
  expected(requestId: string | string[] | undefined, decisions: number): void {
    if (typeof requestId !== 'string') {
      this.withoutRequestId++;
      return;
    }
    this.decisions.set(requestId, (this.decisions.get(requestId) ?? 0) + decisions);
  }

  /** An answer the request did not expect (its status, or its body). */
  wrong(kind: Kind, instance: string, what: string): void {
    this.unexpected++;
    this.#example(`${kind} on ${instance}: ${what}`);
  }

  /** At most three examples of each kind, twelve in all. */
  #example(text: string): void {
    const kind = text.slice(0, text.indexOf(' on '));
    if (this.examples.length >= 12 || this.examples.filter((example) => example.startsWith(`${kind} on `)).length >= 3) return;
    this.examples.push(text.length > 300 ? `${text.slice(0, 300)}...` : text);
  }

  total(kinds: readonly Kind[] = KINDS): number {
    let sum = 0;
    for (const kind of kinds) for (const count of this.rows.get(kind)!.byInstance.values()) sum += count;
    return sum;
  }

  count(statusClassName: StatusClass): number {
    let sum = 0;
    for (const row of this.rows.values()) sum += row.byClass[statusClassName];
    return sum;
  }

  get rateLimited(): number {
    let sum = 0;
    for (const row of this.rows.values()) sum += row.rateLimited;
    return sum;
  }

  expectedDecisions(): number {
    let sum = 0;
    for (const count of this.decisions.values()) sum += count;
    return sum;
  }
}

function statusClass(status: number): StatusClass {
  if (status >= 500) return '5xx';
  if (status >= 400) return '4xx';
  if (status >= 300) return '3xx';
  return '2xx';
}

/** The value at `quantile` of `values` (sorted in place), in ms with two decimals; null when there are none. */
export function percentile(values: number[], quantile: number): number | null {
  if (values.length === 0) return null;
  values.sort((a, b) => a - b);
  const value = values[Math.min(values.length - 1, Math.floor(quantile * values.length))]!;
  return Math.round(value * 100) / 100;
}
