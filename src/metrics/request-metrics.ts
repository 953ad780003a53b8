/**
 * The two metrics every request updates — requests by interface, operation and status, and their duration
 * by interface and operation — counted in plain numbers on the request path and handed to prom-client's
 * registry as metric objects (`get()`, the shape prom-client's own metrics answer with), so a scrape, the
 * text format and the cluster's aggregation are prom-client's. prom-client's own `inc({...labels})` and
 * `observe({...labels}, v)` validate and hash the label object on every call; here the labels are looked
 * up by the strings the request already has.
 */
interface Sample {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/** What prom-client's registry reads of a metric. */
export interface CollectedMetric {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: 'counter' | 'histogram'; aggregator: 'sum'; values: Sample[] }>;
}

class OperationSeries {
  /** Answers by status code. */
  readonly statuses = new Map<number, number>();
  /** Observations per bucket (not cumulative); the last one is above every bound. */
  readonly buckets: number[];
  sum = 0;
  count = 0;

  constructor(
    readonly iface: string,
    readonly operation: string,
    bucketCount: number,
  ) {
    this.buckets = new Array<number>(bucketCount + 1).fill(0);
  }
}

export class RequestMetrics {
  /** interface -> operation -> its numbers. */
  readonly #series = new Map<string, Map<string, OperationSeries>>();

  constructor(readonly bounds: readonly number[]) {}

  record(iface: string, operation: string, status: number, seconds: number): void {
    let byOperation = this.#series.get(iface);
    if (byOperation === undefined) this.#series.set(iface, (byOperation = new Map()));
    let series = byOperation.get(operation);
    if (series === undefined) byOperation.set(operation, (series = new OperationSeries(iface, operation, this.bounds.length)));
    series.statuses.set(status, (series.statuses.get(status) ?? 0) + 1);
    const bounds = this.bounds;
    let bucket = 0;
    while (bucket < bounds.length && seconds > bounds[bucket]!) bucket++;
    series.buckets[bucket]!++;
    series.sum += seconds;
    series.count++;
  }

  /** Requests answered, by interface, operation and status. */
  counter(name: string, help: string): CollectedMetric {
    const values = (): Sample[] => {
      const samples: Sample[] = [];
      for (const series of this.#all()) {
        for (const [status, value] of series.statuses) {
          samples.push({ labels: { interface: series.iface, operation: series.operation, status: String(status) }, value });
        }
      }
      return samples;
    };
    return collected(name, help, 'counter', values);
  }

  /** Durations in seconds, by interface and operation, with the bucket bounds given to the constructor. */
  histogram(name: string, help: string): CollectedMetric {
    const values = (): Sample[] => {
      const samples: Sample[] = [];
      for (const series of this.#all()) {
        const labels = { interface: series.iface, operation: series.operation };
        let cumulative = 0;
        this.bounds.forEach((bound, i) => {
          cumulative += series.buckets[i]!;
          samples.push({ labels: { ...labels, le: bound }, value: cumulative, metricName: `${name}_bucket` });
        });
        samples.push({ labels: { ...labels, le: '+Inf' }, value: series.count, metricName: `${name}_bucket` });
        samples.push({ labels, value: series.sum, metricName: `${name}_sum` });
        samples.push({ labels, value: series.count, metricName: `${name}_count` });
      }
      return samples;
    };
    return collected(name, help, 'histogram', values);
  }

  *#all(): Iterable<OperationSeries> {
    for (const byOperation of this.#series.values()) yield* byOperation.values();
  }
}

/**
 * A counter with three labels, counted like `RequestMetrics` (nested maps of the label values, no hashing
 * of a label object): for what every request updates, such as its policy decision.
 */
export class Counter3 {
  readonly #counts = new Map<string, Map<string, Map<string, number>>>();

  constructor(readonly labelNames: readonly [string, string, string]) {}

  inc(a: string, b: string, c: string): void {
    let byB = this.#counts.get(a);
    if (byB === undefined) this.#counts.set(a, (byB = new Map()));
    let byC = byB.get(b);
    if (byC === undefined) byB.set(b, (byC = new Map()));
    byC.set(c, (byC.get(c) ?? 0) + 1);
  }

  metric(name: string, help: string): CollectedMetric {
    const [nameA, nameB, nameC] = this.labelNames;
    return collected(name, help, 'counter', () => {
      const samples: Sample[] = [];
      for (const [a, byB] of this.#counts) {
        for (const [b, byC] of byB) for (const [c, value] of byC) samples.push({ labels: { [nameA]: a, [nameB]: b, [nameC]: c }, value });
      }
      return samples;
    });
  }
}

function collected(name: string, help: string, type: 'counter' | 'histogram', values: () => Sample[]): CollectedMetric {
  return { name, help, type, aggregator: 'sum', get: async () => ({ name, help, type, aggregator: 'sum', values: values() }) };
}
