/** One line an operator can act on, for the failures of listen() that are the configuration's, else null. */
export function listenProblem(error: unknown, host: string, port: number): string | null {
  switch ((error as NodeJS.ErrnoException | null)?.code) {
    case 'EADDRINUSE':
      return `port ${port} is already in use; stop what holds it or set PORT to a free port`;
    case 'EACCES':
      return `permission denied for port ${port}; ports below 1024 need privileges, set PORT to 1024 or above`;
    case 'EADDRNOTAVAIL':
      return `${host} is not an address of this machine; set HOST to one of its addresses (or 0.0.0.0)`;
    default:
      return null;
  }
}

/** The metrics listener's own variant of a listen problem (its variable is METRICS_PORT). */
export function metricsListenProblem(error: unknown, host: string, port: number): string | null {
  const problem = listenProblem(error, host, port);
  return problem === null ? null : `cannot serve metrics on ${host}:${port}: ${problem.replace('PORT', 'METRICS_PORT')}`;
}
