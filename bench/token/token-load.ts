/**
 * Saturating load on a token endpoint with autocannon: every connection sends its next request as soon as
 * the last is answered. Client credentials send one fixed body; refresh-token rotation gives each connection
 * its own chain, each request spending the refresh token the previous response returned (a spent one is
 * refused, and at oidc-provider revokes the chain's grant), so a chain is used by one connection only.
 */
import autocannon from 'autocannon';

export const CONNECTIONS = 50;

export interface LoadResult {
  /** 2xx responses: tokens issued. */
  tokens: number;
  p50: number;
  p99: number;
  /** Responses other than 2xx, failed requests and timeouts. */
  errors: number;
}

export type Load = (seconds: number) => Promise<LoadResult>;

const FORM = 'application/x-www-form-urlencoded';

export function formLoad(url: string, authorization: string, body: string): Load {
  return (seconds) => run({ url, duration: seconds, method: 'POST', headers: { authorization, 'content-type': FORM }, body });
}

/** One connection per chain: `chains` holds CONNECTIONS refresh tokens, each spent at most once here. */
export function refreshLoad(url: string, authorization: string, chains: string[]): Load {
  return (seconds) => {
    const tokens = [...chains];
    return run({
      url,
      duration: seconds,
      method: 'POST',
      headers: { authorization, 'content-type': FORM },
      setupClient(client: autocannon.Client) {
        // Each connection owns one chain for the whole run (autocannon's per-request context is reset
        // after every request, so the current token lives here instead).
        const chain = { token: tokens.pop() };
        if (chain.token === undefined) throw new Error('fewer refresh tokens than connections');
        client.setRequests([
          {
            method: 'POST',
            setupRequest: (request) => ({ ...request, body: `grant_type=refresh_token&refresh_token=${chain.token}` }),
            onResponse: (status, body) => {
              if (status === 200) chain.token = (JSON.parse(body) as { refresh_token: string }).refresh_token;
            },
          },
        ]);
      },
    });
  };
}

async function run(options: autocannon.Options): Promise<LoadResult> {
  const result = await autocannon({ connections: CONNECTIONS, ...options });
  return {
    tokens: result['2xx'],
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.non2xx + result.errors + result.timeouts,
  };
}
