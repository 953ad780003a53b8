import { AggregatorRegistry, Registry, type Metric } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RequestMetrics } from '../../src/metrics/request-metrics.js';

function registryOf(metrics: RequestMetrics): Registry {
  const registry = new Registry();
  registry.registerMetric(metrics.counter('requests_total', 'Requests.') as unknown as Metric);
  registry.registerMetric(metrics.histogram('duration_seconds', 'Durations.') as unknown as Metric);
  return registry;
}

describe('RequestMetrics: per-request counters exposed through prom-client', () => {
  it("counts by status and fills cumulative buckets, a value on a bound counting in that bound's bucket", async () => {
    const metrics = new RequestMetrics([0.001, 0.01]);
    metrics.record('rest', 'getPost', 200, 0.001);
    metrics.record('rest', 'getPost', 200, 0.005);
    metrics.record('rest', 'getPost', 404, 2);
    metrics.record('graphql', 'graphql', 200, 0.0001);
    const text = await registryOf(metrics).metrics();
    expect(text).toBe(
      [
        '# HELP requests_total Requests.',
        '# TYPE requests_total counter',
        'requests_total{interface="rest",operation="getPost",status="200"} 2',
        'requests_total{interface="rest",operation="getPost",status="404"} 1',
        'requests_total{interface="graphql",operation="graphql",status="200"} 1',
        '',
        '# HELP duration_seconds Durations.',
        '# TYPE duration_seconds histogram',
        'duration_seconds_bucket{interface="rest",operation="getPost",le="0.001"} 1',
        'duration_seconds_bucket{interface="rest",operation="getPost",le="0.01"} 2',
        'duration_seconds_bucket{interface="rest",operation="getPost",le="+Inf"} 3',
        'duration_seconds_sum{interface="rest",operation="getPost"} 2.006',
        'duration_seconds_count{interface="rest",operation="getPost"} 3',
        'duration_seconds_bucket{interface="graphql",operation="graphql",le="0.001"} 1',
        'duration_seconds_bucket{interface="graphql",operation="graphql",le="0.01"} 1',
        'duration_seconds_bucket{interface="graphql",operation="graphql",le="+Inf"} 1',
        'duration_seconds_sum{interface="graphql",operation="graphql"} 0.0001',
        'duration_seconds_count{interface="graphql",operation="graphql"} 1',
        '',
      ].join('\n'),
    );
  });

  it("sums across processes with prom-client's cluster aggregation", async () => {
    const [a, b] = [new RequestMetrics([0.01]), new RequestMetrics([0.01])];
    a.record('rest', 'listPosts', 200, 0.002);
    b.record('rest', 'listPosts', 200, 0.02);
    b.record('rest', 'listPosts', 500, 0.003);
    const merged = AggregatorRegistry.aggregate([await registryOf(a).getMetricsAsJSON(), await registryOf(b).getMetricsAsJSON()]);
    const lines = (await merged.metrics()).split('\n');
    expect(lines).toContain('requests_total{interface="rest",operation="listPosts",status="200"} 2');
    expect(lines).toContain('requests_total{interface="rest",operation="listPosts",status="500"} 1');
    expect(lines).toContain('duration_seconds_bucket{interface="rest",operation="listPosts",le="0.01"} 2');
    expect(lines).toContain('duration_seconds_count{interface="rest",operation="listPosts"} 3');
  });
});
