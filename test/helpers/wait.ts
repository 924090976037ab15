/**
 * Bounded waits. Every wait in a test has a deadline and fails with a message saying what it waited
 * for: a test that hangs tells nothing until the runner's 300 s limit. Sleeping for a while and
 * hoping something happened is not a wait; poll for the fact with waitFor, or backdate the row.
 */
export { waitFor, type WaitOptions } from '../../scripts/lib/processes.ts';

/** Settles as `promise` does, or fails after `timeoutMs` naming `what` it waited for. */
export async function within<T>(what: string, promise: Promise<T>, timeoutMs = 60_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}
