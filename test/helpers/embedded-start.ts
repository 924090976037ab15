/**
 * One embedded PostgreSQL start in a process of its own, as start-up runs it: `node --import tsx
 * test/helpers/embedded-start.ts '<json options>'`. Prints each progress line as `{"progress": ...}`,
 * then `{"started": true, "port": ..., "url": ...}`; stops the server on SIGTERM, then exits.
 * For tests of starts that race across processes (the lock around the copy of the programs).
 */
import { startEmbeddedPostgres, type EmbeddedOptions } from '../../src/persistence/embedded.ts';
import { rememberNewPort, resolveEmbeddedPort } from '../../src/persistence/embedded-port.ts';

const opts = JSON.parse(process.argv[2] ?? '{}') as Pick<EmbeddedOptions, 'dataDir' | 'port' | 'sharedDir' | 'serverPackage'>;
const server = await startEmbeddedPostgres({
  ...opts,
  port: await resolveEmbeddedPort(opts.dataDir, undefined, opts.port),
  nextPort: () => rememberNewPort(opts.dataDir),
  onProgress: (line) => console.log(JSON.stringify({ progress: line })),
});
process.once('SIGTERM', () => void server.stop().then(() => process.exit(0)));
console.log(JSON.stringify({ started: true, port: server.port, url: server.url }));
