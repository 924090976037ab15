/** Calling Ferry's HTTP API from a test: an in-process app (app.request) or a server at a base URL. */

export interface Reply {
  status: number;
  body: any;
}

/** What `createApp()` returns, as far as a caller needs it. */
export interface InProcessApp {
  request(path: string, init: RequestInit): Response | Promise<Response>;
}

/** Sends JSON (when `body` is given) with a bearer token; the answer's JSON body, or null when empty. */
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
  return { status: res.status, body: text ? JSON.parse(text) : null };
}
