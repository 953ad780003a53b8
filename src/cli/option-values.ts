import { UsageError } from './cli-errors.js';

/**
 * parseArgs hands every value over as a string. Numbers the contract bounds are only turned into
 * integers here; their ranges are checked by the contract schema.
 */
export function parseInteger(option: string, value: unknown): number {
  if (typeof value !== 'string' || !/^\d{1,9}$/.test(value)) throw new UsageError(`--${option}: must be a whole number, got ${JSON.stringify(value)}`);
  return Number(value);
}

export function parsePositiveInteger(option: string, value: unknown): number {
  const number = parseInteger(option, value);
  if (number < 1) throw new UsageError(`--${option}: must be at least 1`);
  return number;
}
