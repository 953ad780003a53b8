import { isoTime, newId } from '../storage/ids.js';
import type { AuditDecision, AuditEvent } from './audit-event.js';

/** An IP address as the contract describes `sourceAddress`; anything else (a proxy's odd value) is not kept. */
const ADDRESS = /^[0-9A-Fa-f.:]{1,64}$/;

interface Group {
  decision: AuditDecision;
  sourceAddress: string | null;
  count: number;
  firstSeen: number;
  lastSeen: number;
}

/**
 * Denials of unauthenticated callers (a bad, expired or forged token, a client that failed to
 * authenticate, a token sent in the URL, a grant refused to a public client) counted per source address,
 * interface, operation and reason over a window, then written as one
 * event each: anonymous callers cannot grow the audit table by one row per request, and every decision is
 * still accounted for (the counts add up to the requests refused). At most `maxGroups` addresses are
 * told apart per window; beyond that, refusals are counted under no address.
 */
export class AuthFailureAggregator {
  readonly #groups = new Map<string, Group>();

  constructor(private readonly maxGroups = 10_000) {}

  get size(): number {
    return this.#groups.size;
  }

  add(decision: AuditDecision, now: number): void {
    let address = decision.sourceAddress != null && ADDRESS.test(decision.sourceAddress) ? decision.sourceAddress : null;
    // A registered client that failed to authenticate stays named: a guessing run against one client shows.
    let key = `${decision.interface}\u0000${decision.operation}\u0000${decision.reason}\u0000${address ?? ''}\u0000${decision.clientId ?? ''}`;
    let group = this.#groups.get(key);
    if (!group && this.#groups.size >= this.maxGroups) {
      address = null;
      key = `${decision.interface}\u0000${decision.operation}\u0000${decision.reason}\u0000\u0000`;
      group = this.#groups.get(key);
    }
    if (group) {
      group.count++;
      group.lastSeen = now;
      return;
    }
    this.#groups.set(key, { decision, sourceAddress: address, count: 1, firstSeen: now, lastSeen: now });
  }

  /**
   * One event per group, and an empty window. Each is timed when it is written (`now`), like every other
   * event, so the table stays in time order; `firstSeen` and `lastSeen` say when its refusals happened.
   */
  drain(now: number): AuditEvent[] {
    const events: AuditEvent[] = [];
    for (const { decision, sourceAddress, count, firstSeen, lastSeen } of this.#groups.values()) {
      events.push({
        id: newId(now),
        time: isoTime(now),
        requestId: null,
        subject: null,
        clientId: sourceAddress === null ? null : decision.clientId,
        interface: decision.interface,
        operation: decision.operation,
        resourceType: null,
        resourceId: null,
        decision: 'deny',
        reason: decision.reason,
        count,
        sourceAddress,
        firstSeen: isoTime(firstSeen),
        lastSeen: isoTime(lastSeen),
        scopes: null,
        traceId: null,
      });
    }
    this.#groups.clear();
    return events;
  }
}
