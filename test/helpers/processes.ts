export { exited, spawnWorker } from '../../scripts/lib/processes.ts';
