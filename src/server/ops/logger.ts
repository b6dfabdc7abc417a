/**
 * The server's log: JSON lines (pino) on stdout, one per request (ops/access-log.ts) and one per
 * start-up step, engine event and error. `--log-level` chooses the least severe level written. The
 * text of states and questions is never logged unless --log-bodies is given.
 */
import pino from 'pino';

export type Logger = pino.Logger;

export function createLogger(level: string): Logger {
  return pino({ level, base: { service: 'tqserve', pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime, formatters: { level: (label) => ({ level: label }) } });
}
