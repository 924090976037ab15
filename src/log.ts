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

/**
 * Sets the level of the one process-wide logger. Process-global on purpose: the level is a property
 * of the process's output (one stream, one level), not of an app, so a second startFerry in the same
 * process (tests) sets the same logger; they all run with the same FERRY_LOG_LEVEL.
 */
export function setLogLevel(level: LogLevel): void {
  log.level = level;
}
