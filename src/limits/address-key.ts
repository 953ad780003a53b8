import net from 'node:net';

/**
 * The budget an address draws on. An IPv4 address is its own; an IPv6 address shares its /64, the block a
 * single subscriber is routinely given (RFC 6177), so that one host walking the 2^64 addresses of its own
 * network spends one budget, not 2^64 of them. An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, how a
 * dual-stack socket reports an IPv4 peer) is the IPv4 address. Anything else (a Unix socket) is used as is.
 */
export function addressKey(address: string): string {
  if (net.isIPv4(address)) return address;
  if (!net.isIPv6(address)) return address;
  const groups = expandIpv6(address);
  if (groups === null) return address;
  if (groups.slice(0, 5).every((group) => group === 0) && groups[5] === 0xffff) {
    return `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`;
  }
  return `${groups
    .slice(0, 4)
    .map((group) => group.toString(16))
    .join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a dotted IPv4 tail read as two groups). */
function expandIpv6(address: string): number[] | null {
  let text = address.split('%', 1)[0]!.toLowerCase();
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const octets = dotted[1]!.split('.').map(Number);
    text = `${text.slice(0, dotted.index)}${((octets[0]! << 8) | octets[1]!).toString(16)}:${((octets[2]! << 8) | octets[3]!).toString(16)}`;
  }
  const [head, tail] = text.split('::', 2) as [string, string | undefined];
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const missing = 8 - headGroups.length - tailGroups.length;
  if (tail === undefined ? missing !== 0 : missing < 1) return null;
  const groups = [...headGroups, ...new Array<string>(tail === undefined ? 0 : missing).fill('0'), ...tailGroups].map((group) => Number.parseInt(group, 16));
  return groups.length === 8 && groups.every((group) => Number.isInteger(group) && group >= 0 && group <= 0xffff) ? groups : null;
}
