import pino from 'pino';
import { earlyLogLevel, type LogLevel } from './config.ts';

/**
 * One structured JSON logger; children carry request_id, node_id, worker and attempt. Its level
 * comes from the configuration: a valid FERRY_LOG_LEVEL from the first import on, and start-up sets
 * the checked value again (a bad one stops start naming the variable, never an error inside pino).
 */
export const log = pino({
  level: earlyLogLevel(),
  base: { service: 'ferry', pid: process.pid },
  timestamp: pino.stdTimeFunctions.isoTime,
});

export type Logger = pino.Logger;

export function setLogLevel(level: LogLevel): void {
  log.level = level;
}
