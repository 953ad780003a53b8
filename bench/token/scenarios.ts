/**
 * The token-endpoint scenarios and what each server must show to take part: the request body, the check
 * that a response is the token format the scenario names (so that both servers issue the same thing), and
 * a fresh load for each slice.
 */
import type { Server } from '../processes.js';
import { CONNECTIONS, formLoad, refreshLoad, type Load } from './token-load.js';
import { basicAuthorization, JWT_CLIENT, OPAQUE_CLIENT, REFRESH_CLIENT, SCOPE } from '../servers/token-clients.js';

export const TOKEN_PATH = '/oauth/token';
export const CLIENT_CREDENTIALS_BODY = `grant_type=client_credentials&scope=${encodeURIComponent(SCOPE)}`;

export interface Side {
  name: string;
  /** Not a token endpoint: measured with the first scenario only, as a reference. */
  floor?: boolean;
  server: Server;
  base: string;
  mintRefreshToken(): Promise<string>;
  refreshUnavailable(): Promise<string | null>;
}

export interface Scenario {
  name: string;
  client: string;
  /** The body of one request, as the load sends it. */
  body(side: Side): Promise<string>;
  /** What a response must hold for the scenario to measure what it says. */
  check(body: Record<string, unknown>): string | null;
  /** Why the scenario cannot run on this server, or null. */
  unavailable(side: Side): Promise<string | null>;
  /** A fresh load (refresh chains are spent by a run, so each run gets its own). */
  prepare(side: Side): Promise<Load>;
}

/** RFC 9068 §2.1: an access token JWT says `at+jwt`; both servers sign with ES256. */
function jwtAccessToken(body: Record<string, unknown>): string | null {
  const header = String(body.access_token).split('.')[0]!;
  const { alg, typ } = JSON.parse(Buffer.from(header, 'base64url').toString() || '{}') as { alg?: string; typ?: string };
  return alg === 'ES256' && typ === 'at+jwt' ? null : `expected an ES256 at+jwt, got ${alg} ${typ}`;
}

export const SCENARIOS: readonly Scenario[] = [
  {
    name: 'client credentials, JWT (ES256)',
    client: JWT_CLIENT,
    body: async () => CLIENT_CREDENTIALS_BODY,
    check: jwtAccessToken,
    unavailable: async () => null,
    prepare: async (side) => formLoad(side.base + TOKEN_PATH, basicAuthorization(JWT_CLIENT), CLIENT_CREDENTIALS_BODY),
  },
  {
    name: 'client credentials, opaque',
    client: OPAQUE_CLIENT,
    body: async () => CLIENT_CREDENTIALS_BODY,
    check: (body) => (/^[A-Za-z0-9_-]{32,}$/.test(String(body.access_token)) ? null : 'expected an opaque token'),
    unavailable: async () => null,
    prepare: async (side) => formLoad(side.base + TOKEN_PATH, basicAuthorization(OPAQUE_CLIENT), CLIENT_CREDENTIALS_BODY),
  },
  {
    name: 'refresh token rotation, JWT access token',
    client: REFRESH_CLIENT,
    body: async (side) => `grant_type=refresh_token&refresh_token=${await side.mintRefreshToken()}`,
    check: (body) => jwtAccessToken(body) ?? (typeof body.refresh_token === 'string' ? null : 'no rotated refresh token'),
    unavailable: (side) => side.refreshUnavailable(),
    prepare: async (side) => {
      const chains: string[] = [];
      for (let i = 0; i < CONNECTIONS; i++) chains.push(await side.mintRefreshToken());
      return refreshLoad(side.base + TOKEN_PATH, basicAuthorization(REFRESH_CLIENT), chains);
    },
  },
];

/** One request as a client would send it, and its body checked against the scenario's token format. */
export async function checkResponse(scenario: Scenario, side: Side): Promise<void> {
  const response = await fetch(side.base + TOKEN_PATH, {
    method: 'POST',
    headers: { authorization: basicAuthorization(scenario.client), 'content-type': 'application/x-www-form-urlencoded' },
    body: await scenario.body(side),
  });
  const json = (await response.json()) as Record<string, unknown>;
  const problem = response.status !== 200 ? `${response.status} ${JSON.stringify(json)}` : side.floor ? null : scenario.check(json);
  if (problem) throw new Error(`${side.name}, ${scenario.name}: ${problem}`);
}
