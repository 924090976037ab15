/** Calling Ferry's HTTP API from a test: an in-process app (app.request) or a server at a base URL. */

export interface Reply {
  status: number;
  /** The answer's JSON, or null when it is empty or not JSON. */
  body: any;
  /** The answer as sent. */
  text: string;
}

/** What `createApp()` returns, as far as a caller needs it. */
export interface InProcessApp {
  request(path: string, init: RequestInit): Response | Promise<Response>;
}

/** Sends JSON (when `body` is given) with a bearer token; the answer's status, JSON and text. */
export async function callApi(
  target: InProcessApp | string,
  method: string,
  path: string,
  token: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const init: RequestInit = {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  };
  const res = typeof target === 'string' ? await fetch(`${target}${path}`, init) : await target.request(path, init);
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: the text says what came
  }
  return { status: res.status, body: parsed, text };
}
