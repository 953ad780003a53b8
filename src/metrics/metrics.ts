import http from 'node:http';
import { Counter, Gauge, Registry, type Metric, type RegistryContentType } from 'prom-client';
import { Counter3, RequestMetrics, type CollectedMetric } from './request-metrics.js';

/**
 * The server's Prometheus metrics (prom-client), one registry per app. Served on METRICS_PORT by
 * `serveMetrics`, a listener of its own (bound to loopback unless METRICS_HOST says otherwise), never on
 * the API's port. Labels are bounded sets: operations and fields of the contract, statuses, grant types,
 * policy reasons, rate-limit policies — never ids, addresses or anything a caller chooses.
 */
export class Metrics {
  readonly registry = new Registry();

  /** Requests answered and their durations: updated on every request, so counted without label hashing. */
  readonly #requests = new RequestMetrics([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]);

  /** Updated on every request too. */
  readonly #decisions = new Counter3(['interface', 'decision', 'reason']);

  readonly #rateLimited = new Counter({
    name: 'portcullis_rate_limited_total',
    help: 'Requests refused with 429, by the budget that was spent.',
    labelNames: ['policy'] as const,
    registers: [this.registry],
  });

  readonly #tokens = new Counter({
    name: 'portcullis_tokens_issued_total',
    help: 'Access tokens issued, by grant type.',
    labelNames: ['grant_type'] as const,
    registers: [this.registry],
  });

  readonly #deprecated = new Counter({
    name: 'portcullis_deprecated_uses_total',
    help: 'Allowed uses of deprecated REST operations and GraphQL fields, by interface and name.',
    labelNames: ['interface', 'name'] as const,
    registers: [this.registry],
  });

  readonly #notices = new Counter({
    name: 'portcullis_invalidation_notices_total',
    help: 'Notices that the invalidation sequence has new events, sent to and received from other server processes (Redis or the cluster primary).',
    labelNames: ['direction'] as const,
    registers: [this.registry],
  });

  constructor(auditQueueDepth: () => number) {
    const register = (metric: CollectedMetric) => this.registry.registerMetric(metric as unknown as Metric);
    register(this.#requests.counter('portcullis_requests_total', 'Requests answered, by interface, operation and status.'));
    register(
      this.#requests.histogram(
        'portcullis_request_duration_seconds',
        'Time from a request arriving to its answer being sent, by interface and operation.',
      ),
    );
    register(this.#decisions.metric('portcullis_policy_decisions_total', 'Authorization decisions, by interface, outcome and the check that decided.'));
    new Gauge({
      name: 'portcullis_audit_queue_depth',
      help: 'Audit events recorded and not yet written to the database.',
      registers: [this.registry],
      collect() {
        this.set(auditQueueDepth());
      },
    });
  }

  request(iface: string, operation: string, status: number, seconds: number): void {
    this.#requests.record(iface, operation, status, seconds);
  }

  decision(iface: string, decision: string, reason: string): void {
    this.#decisions.inc(iface, decision, reason);
  }

  invalidationNotice(direction: 'sent' | 'received'): void {
    this.#notices.inc({ direction });
  }

  rateLimited(policy: string): void {
    this.#rateLimited.inc({ policy });
  }

  tokenIssued(grantType: string): void {
    this.#tokens.inc({ grant_type: grantType });
  }

  deprecatedUse(iface: string, name: string): void {
    this.#deprecated.inc({ interface: iface, name });
  }
}

/** `GET /metrics` in Prometheus' text format on its own listener; anything else is 404. */
export async function serveMetrics<R extends Registry<RegistryContentType>>(
  registry: R,
  host: string,
  port: number,
  /** What one scrape answers: the registry's metrics, or (the cluster's primary) every worker's summed. */
  collect: (registry: R) => Promise<string> = (r) => r.metrics(),
): Promise<http.Server> {
  const server = http.createServer((request, response) => {
    const path = (request.url ?? '').split('?', 1)[0];
    if (request.method !== 'GET' || path !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Not found: GET /metrics\n');
      return;
    }
    collect(registry).then(
      (text) => response.writeHead(200, { 'content-type': registry.contentType, 'cache-control': 'no-store' }).end(text),
      () => response.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('The metrics could not be collected.\n'),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}
