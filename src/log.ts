import pino from 'pino';

/** One structured JSON logger; children carry request_id, node_id, worker and attempt. */
export const log = pino({
  level: process.env.FERRY_LOG_LEVEL ?? 'info',
  base: { service: 'ferry', pid: process.pid },
  timestamp: pino.stdTimeFunctions.isoTime,
});

export type Logger = pino.Logger;

export function setLogLevel(level: string): void {
  log.level = level;
}
