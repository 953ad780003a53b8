import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The PostgreSQL server's maintenance database (trust authentication on 127.0.0.1). */
export const POSTGRES_ADMIN_URL = process.env.SOAK_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** A new, empty database for one run; `drop()` removes it whatever the run left connected. */
export async function createDatabase(): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const name = `portcullis_soak_${randomBytes(6).toString('hex')}`;
  await runAsAdmin(`create database ${name}`);
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${name}`;
  return { url: url.toString(), name, drop: () => runAsAdmin(`drop database if exists ${name} with (force)`) };
}

async function runAsAdmin(statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

export interface AuditFigures {
  /** Rows in the chain, and the decisions they stand for (an aggregated row counts `count`). */
  rows: number;
  decisions: number;
  aggregatedRows: number;
  /** The load's decisions (its clients'), per request id. */
  byRequest: Map<string, number>;
  /** The load's decisions recorded with no request id (aggregated refusals), summed by their count. */
  withoutRequestId: number;
  denials: number;
}

/** What the audit chain holds, read once the instances have flushed it and exited. */
export async function readAuditFigures(url: string, loadClientIds: readonly string[]): Promise<AuditFigures> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const totals = await client.query<{ rows: string; decisions: string; aggregated: string }>(
      `select count(*) as rows, coalesce(sum(coalesce(count, 1)), 0) as decisions, count(count) as aggregated from audit_events`,
    );
    const load = await client.query<{ request_id: string | null; decisions: string; denials: string }>(
      `select request_id, sum(coalesce(count, 1)) as decisions, sum(case when decision = 'deny' then coalesce(count, 1) else 0 end) as denials
         from audit_events where client_id = any($1) group by request_id`,
      [loadClientIds],
    );
    const byRequest = new Map<string, number>();
    let withoutRequestId = 0;
    let denials = 0;
    for (const row of load.rows) {
      denials += Number(row.denials);
      if (row.request_id === null) withoutRequestId += Number(row.decisions);
      else byRequest.set(row.request_id, Number(row.decisions));
    }
    const total = totals.rows[0]!;
    return { rows: Number(total.rows), decisions: Number(total.decisions), aggregatedRows: Number(total.aggregated), byRequest, withoutRequestId, denials };
  } finally {
    await client.end();
  }
}

/** Posts stored: every one should be a write some request was told succeeded. */
export async function countPosts(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const result = await client.query<{ n: string }>('select count(*) as n from posts');
    return Number(result.rows[0]!.n);
  } finally {
    await client.end();
  }
}
