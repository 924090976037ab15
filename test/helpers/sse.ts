/** Reading a server-sent event stream over real HTTP in a test, with bounded waits. */
import { within } from './wait.ts';

export interface SseMessage {
  event?: string;
  id?: string;
  data?: string;
  comment?: string;
}

export interface SseReader {
  status: number;
  /** The answer's JSON when it was not a stream (an error). */
  error: any;
  /** The next message or comment; rejects with 'stream ended' when the server closed the stream. */
  next(timeoutMs?: number): Promise<SseMessage>;
  /**
   * The next message of type `event`, passing over the others (heartbeats, say); bounded as a
   * whole, since on a stream with heartbeats next() alone would never time out.
   */
  nextEvent(event: string, timeoutMs?: number): Promise<SseMessage>;
  /** Reads until the server closes the stream; every message seen on the way. */
  untilClosed(timeoutMs?: number): Promise<SseMessage[]>;
  close(): void;
}

export async function openSse(url: string, headers: Record<string, string>): Promise<SseReader> {
  const ctl = new AbortController();
  const res = await fetch(url, { headers: { Accept: 'text/event-stream', ...headers }, signal: ctl.signal });
  if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const text = await res.text();
    let error: any = null;
    try {
      error = JSON.parse(text);
    } catch {
      error = text;
    }
    const fail = () => Promise.reject(new Error(`not a stream: HTTP ${res.status}`));
    return { status: res.status, error, next: fail, nextEvent: fail, untilClosed: fail, close: () => ctl.abort() };
  }
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  const read = async (): Promise<SseMessage> => {
    for (;;) {
      const cut = buffer.indexOf('\n\n');
      if (cut >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const m: SseMessage = {};
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) m.comment = line.slice(1).trim();
          else {
            const i = line.indexOf(':');
            (m as Record<string, string>)[line.slice(0, i)] = line.slice(i + 1).trimStart();
          }
        }
        return m;
      }
      const { value, done } = await reader.read();
      if (done) throw new Error('stream ended');
      buffer += value;
    }
  };
  return {
    status: res.status,
    error: null,
    next: (timeoutMs = 20_000) => within('the next message on the stream', read(), timeoutMs),
    nextEvent: (event, timeoutMs = 20_000) =>
      within(
        `the next ${event} on the stream`,
        (async () => {
          for (;;) {
            const m = await read();
            if (m.event === event) return m;
          }
        })(),
        timeoutMs,
      ),
    untilClosed: (timeoutMs = 20_000) =>
      within(
        'the server to close the stream',
        (async () => {
          const seen: SseMessage[] = [];
          for (;;) {
            try {
              seen.push(await read());
            } catch (err) {
              if ((err as Error).message === 'stream ended') return seen;
              throw err;
            }
          }
        })(),
        timeoutMs,
      ),
    close: () => ctl.abort(),
  };
}
