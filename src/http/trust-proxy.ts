/** Fastify's `trustProxy` option: `(address, hop) => boolean` is its most general form. */
type TrustProxyOption = false | string[] | ((address: string, hop: number) => boolean);

/**
 * TRUST_PROXY as Fastify takes it. A hop count becomes a function that trusts the N hops nearest the server
 * (the socket's peer is hop 0), so the client's address is the Nth X-Forwarded-For entry from the right
 * and whatever a client wrote to the left of it is never read. Fastify's own number option now trusts
 * nothing (it cannot tell a proxy from a client that connects directly); a hop count is for servers that
 * only the proxies can reach, which the README says.
 */
export function trustProxyOption(setting: false | number | readonly string[]): TrustProxyOption {
  if (setting === false) return false;
  if (typeof setting === 'number') return (_address, hop) => hop < setting;
  return [...setting];
}
