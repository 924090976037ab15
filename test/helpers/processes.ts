export { exited, spawnWorker, waitFor } from '../../scripts/lib/processes.ts';
