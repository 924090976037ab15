/**
 * The pg-boss dashboard (queues, jobs, schedules, warnings of Ferry's pg-boss schema) at /dashboard,
 * for tokens whose role grants 'dashboard' (operator, admin).
 *
 * A browser cannot put a bearer token on a page navigation, so the dashboard signs the browser in:
 * POST /dashboard/login with the token in the form body (never in a URL, so it stays out of logs and
 * history) starts a server-side session (table dashboard_sessions) and sets `ferry_dashboard` to the
 * session's random id, never the token: HttpOnly (page scripts cannot read it), SameSite=Strict (no
 * other site can make the browser send it, which is also what keeps the dashboard's job actions safe
 * from cross-site requests), scoped to /dashboard, and Secure unless the request plainly came over
 * loopback (see servedOverLoopback). The session is looked up on every request together with its
 * token, so revoking the token (or signing out) ends it at once. Scripts and tests may send
 * `Authorization: Bearer` instead.
 *
 * Reading is for roles granting 'dashboard' (operator, admin). Anything that changes pg-boss state
 * (every request but GET and HEAD: retry, cancel, resume, delete a job, send one, edit queues and
 * schedules) needs 'dashboard.jobs' (admin) and is audited once the dashboard answered, with what
 * it did: applied, refused, failed, or unverified for changes Ferry cannot check
 * (src/services/dashboard-actions.ts).
 *
 * The dashboard package bundles the pg-boss release whose schema it reads (12.33.2, schema 42);
 * Ferry pins the same pg-boss, see src/actors/boss.ts.
 */
import { createDashboardHandler, type DashboardHandler } from '@pg-boss/dashboard/handler';
import { Hono, type Context } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { PGBOSS_SCHEMA } from '../persistence/pgboss-jobs.ts';
import { performDashboardAction } from '../services/dashboard-actions.ts';
import { signInToDashboard, signOutOfDashboard } from '../services/dashboard-sessions.ts';
import { APP_NAMES } from '../connection-budget.ts';
import { errorStatus, FerryError, NotFoundError } from '../errors.ts';
import { isUuid } from '../ids.ts';
import type { Pool } from '../persistence/db.ts';
import { dashboardSessionToken } from '../persistence/dashboard-sessions.ts';
import { authenticateToken } from '../persistence/tokens.ts';
import { principalActor } from '../persistence/principals.ts';
import { bearerToken, callerOf, can, type AuthEnv } from './auth.ts';
import { recordAuthFailure, refuseIfThrottled, type AuthThrottle } from './auth-throttle.ts';

export const DASHBOARD_PATH = '/dashboard';
export const DASHBOARD_COOKIE = 'ferry_dashboard';
const SESSION_SECONDS = 8 * 3600;

/**
 * The dashboard handlers one app opened (each holds database pools of its own). createApp makes one
 * per app and closes it on the app's close, so stopping one app never closes another app's dashboard.
 */
export class Dashboards {
  private readonly open = new Set<DashboardHandler>();
  private ending = false;

  /** True once close() was called: no handler (and no pool) is opened any more. */
  get closed(): boolean {
    return this.ending;
  }

  add(handler: DashboardHandler): void {
    this.open.add(handler);
  }

  /** Closes every handler's database pools; call when the app stops serving HTTP. */
  async close(): Promise<void> {
    this.ending = true;
    const handlers = [...this.open];
    this.open.clear();
    await Promise.all(handlers.map((h) => h.close()));
  }
}

export interface DashboardDeps {
  pool: Pool;
  /** Where pg-boss lives; by default the pool's own database. */
  databaseUrl?: string;
  /** A direct connection string (the dashboard's pool sets session parameters a pooler refuses). */
  directDatabaseUrl?: string;
  schema?: string;
  /** The registry whose close closes this dashboard's pools (createApp passes the app's own). */
  dashboards?: Dashboards;
  /** Failed sign-ins and bearer tokens count here, with the API's (createApp passes the app's own). */
  authThrottle?: AuthThrottle;
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

function loginPage(message: string | null): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Ferry - queue dashboard sign-in</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 32rem; margin: 4rem auto; padding: 0 1rem">
<h1>Ferry queue dashboard</h1>
<p>Sign in with an API token of role <b>operator</b> or <b>admin</b>. The browser keeps only a session
id (an HttpOnly cookie for this path), never the token; revoking the token ends the session.</p>
${message ? `<p role="alert" style="color: #b00020">${escapeHtml(message)}</p>` : ''}
<form method="post" action="${DASHBOARD_PATH}/login">
<label>API token <input name="token" type="password" autocomplete="off" required size="50"></label>
<button type="submit">Sign in</button>
</form></body></html>`;
}

function loginForm(c: Context, message: string | null, status: number) {
  c.header('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'");
  c.header('Cache-Control', 'no-store');
  return c.html(loginPage(message), status as 200);
}

/** A login post must come from a page of this server (a form elsewhere cannot log a browser in). */
function sameOrigin(c: Context): boolean {
  const origin = c.req.header('Origin');
  if (!origin || origin === 'null') return origin === undefined;
  try {
    return new URL(origin).host === new URL(c.req.url).host;
  } catch {
    return false;
  }
}

const LOOPBACK_HOST = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\])$/i;
const LOOPBACK_PEER = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1|::ffff:127\.\d{1,3}\.\d{1,3}\.\d{1,3})$/i;
// Any of these says a proxy stands between the browser and Ferry, so the browser is not on loopback.
const FORWARDING_HEADERS = ['forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip'];

/**
 * Whether the cookie may go without `Secure`: only for a browser talking to Ferry over loopback by
 * plain http, i.e. the URL's host (the Host header) is a loopback name or address, the connection's
 * peer (when known) is a loopback address, the URL is not https, and no forwarding header is present.
 * No header is trusted to relax anything: Host alone cannot (the peer must be loopback too), and a
 * forwarding header can only make the cookie Secure, never the reverse.
 */
export function servedOverLoopback(c: Context): boolean {
  const url = new URL(c.req.url);
  if (url.protocol !== 'http:' || !LOOPBACK_HOST.test(url.hostname)) return false;
  if (FORWARDING_HEADERS.some((h) => c.req.header(h) !== undefined)) return false;
  const peer = (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming?.socket?.remoteAddress;
  return peer === undefined || LOOPBACK_PEER.test(peer);
}

function cookieOptions(c: Context) {
  return { path: DASHBOARD_PATH, httpOnly: true, sameSite: 'Strict' as const, secure: !servedOverLoopback(c) };
}

const READ_METHODS = new Set(['GET', 'HEAD']);
const JOB_INTENTS = new Set(['cancel', 'retry', 'resume', 'delete']);
// What the audit record may hold: bounded, well-formed, no control characters (jsonb refuses NUL).
const storable = (s: string, max = 200) =>
  s
    .slice(0, max)
    .replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd')
    .replace(/[\u0000-\u001f\u007f]/g, '\ufffd');
const text = (v: unknown, max = 200) => (typeof v === 'string' && v.length > 0 ? storable(v, max) : null);

/** What a change posted to the dashboard is about: the job and queue from the path or the form. */
async function describeChange(c: Context): Promise<{ action: string; queue: string | null; jobId: string | null; path: string; intent: string | null }> {
  const path = c.req.path.slice(DASHBOARD_PATH.length).replace(/\.data$/, '') || '/';
  let form: FormData | null = null;
  try {
    form = await c.req.raw.clone().formData();
  } catch {
    // not a form: nothing more to learn
  }
  const intent = text(form?.get('intent'), 40);
  const onJob = /^\/queues\/([^/]+)\/jobs\/([^/]+)$/.exec(path);
  const onQueue = /^\/queues\/([^/]+)$/.exec(path);
  const decode = (s: string) => {
    try {
      return storable(decodeURIComponent(s));
    } catch {
      return storable(s);
    }
  };
  const queue = onJob ? decode(onJob[1]) : onQueue ? decode(onQueue[1]) : text(form?.get('queueName')) ?? text(form?.get('name'));
  const jobId = onJob ? decode(onJob[2]) : text(form?.get('jobId'));
  const action = jobId && intent && JOB_INTENTS.has(intent) ? `job.${intent}` : 'change';
  return { action, queue, jobId, path: storable(path), intent };
}

/**
 * Paths the dashboard would answer with a 500 (its name check or database query fails on them): a
 * broken percent escape, a queue name pg-boss refuses, a job id that is not a UUID. They name
 * nothing, so 404 here.
 */
function refuseUnservable(c: Context): void {
  const raw = c.req.path.slice(DASHBOARD_PATH.length);
  let path: string;
  try {
    path = decodeURIComponent(raw);
  } catch {
    throw new FerryError('NOT_FOUND', 'No dashboard page at a path with a malformed percent escape', { path: storable(raw) });
  }
  const queue = /^\/queues\/([^/]+?)(?:\.data)?(?:\/|$)/.exec(path);
  // pg-boss's own rule for queue names; the dashboard asserts it and fails on anything else.
  if (queue && queue[1] !== 'create' && !/^[\w.-]+$/.test(queue[1])) throw new NotFoundError('queue', storable(queue[1]));
  const job = /^\/queues\/[^/]+\/jobs\/([^/]+?)(?:\.data)?$/.exec(path);
  if (job && !isUuid(job[1])) throw new NotFoundError('job', storable(job[1]));
}

function wantsPage(c: Context): boolean {
  return c.req.method === 'GET' && (c.req.header('Accept') ?? '').includes('text/html');
}

// The dashboard's pages link a web font from a public font service; an operator's browser would
// fetch it (and announce every dashboard visit there). The links are pointed at this server
// instead: the stylesheet at an empty one served here, the preconnects at this server. React
// hydrates the document the server rendered against what its client code renders, and a link that
// differs between the two (dropped, or its href changed in the page only) is a mismatch: React
// error #418, and the page is rendered again on the client, Google links included. So the same
// rewrite is applied to the page and to the client scripts that render the links.
const OUTSIDE_ASSET_URL = /https:\/\/fonts\.(?:googleapis|gstatic)\.com[^"'`\s<>)]*/g;
export const DASHBOARD_NO_FONTS = `${DASHBOARD_PATH}/ferry-no-fonts.css`;
const localAsset = (url: string) => (/\/css2?\b/.test(url) ? DASHBOARD_NO_FONTS : `${DASHBOARD_PATH}/`);
const REWRITTEN_TYPES = /^(?:text\/html|text\/javascript|application\/javascript)\b/;
const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self' 'unsafe-inline'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

async function withoutOutsideAssets(res: Response): Promise<Response> {
  const headers = new Headers(res.headers);
  headers.set('Content-Security-Policy', DASHBOARD_CSP);
  // An encoded body cannot be rewritten as text; the dashboard's handler sends none (its test says so).
  if (!REWRITTEN_TYPES.test(headers.get('content-type') ?? '') || headers.has('content-encoding')) {
    return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
  }
  const body = await res.text();
  OUTSIDE_ASSET_URL.lastIndex = 0;
  if (!OUTSIDE_ASSET_URL.test(body)) return new Response(body, { status: res.status, statusText: res.statusText, headers });
  headers.delete('content-length');
  headers.delete('etag'); // the body is not the one that tag names
  return new Response(body.replace(OUTSIDE_ASSET_URL, localAsset), { status: res.status, statusText: res.statusText, headers });
}

export function dashboardRoutes(deps: DashboardDeps): Hono<AuthEnv> {
  const dashboards = deps.dashboards ?? new Dashboards();
  let handler: DashboardHandler | null = null;
  const dashboard = () => {
    // A stopped app opens no pool that nobody would close.
    if (dashboards.closed) throw new FerryError('SERVICE_UNAVAILABLE', 'the server is stopping');
    if (!handler) {
      const base = deps.databaseUrl ?? deps.directDatabaseUrl ?? deps.pool.options.connectionString;
      if (!base) throw new FerryError('SERVICE_UNAVAILABLE', 'the dashboard has no database to read');
      // Named, so the connection budget knows these connections as the cluster's own.
      const named = new URL(base);
      if (!named.searchParams.has('application_name')) named.searchParams.set('application_name', APP_NAMES.dashboard);
      const url = named.toString();
      handler = createDashboardHandler({
        databases: [{ url, name: 'ferry', schema: deps.schema ?? PGBOSS_SCHEMA }],
        basePath: DASHBOARD_PATH,
      });
      dashboards.add(handler);
    }
    return handler;
  };

  const app = new Hono<AuthEnv>();

  app.get(`${DASHBOARD_PATH}/login`, (c) => loginForm(c, null, 200));
  // What the font stylesheet link points at instead (see OUTSIDE_ASSET_URL): no font, from anyone.
  app.get(DASHBOARD_NO_FONTS, (c) => c.body('/* the dashboard uses the browser\'s own fonts */\n', 200, { 'Content-Type': 'text/css; charset=utf-8', 'Cache-Control': 'max-age=86400', 'X-Content-Type-Options': 'nosniff' }));

  app.post(`${DASHBOARD_PATH}/login`, async (c) => {
    if (!sameOrigin(c)) return loginForm(c, 'This sign-in form was not sent from this server.', errorStatus.FORBIDDEN);
    try {
      refuseIfThrottled(deps.authThrottle, c);
    } catch (err) {
      if (!(err instanceof FerryError)) throw err;
      return loginForm(c, 'Too many failed sign-ins from this address; try again later.', errorStatus.AUTH_THROTTLED);
    }
    const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
    const token = typeof form.token === 'string' ? form.token.trim() : '';
    const who = token ? await authenticateToken(deps.pool, token) : null;
    if (!who) {
      if (token) recordAuthFailure(deps.authThrottle, c);
      return loginForm(c, 'That token is not a valid API token.', errorStatus.UNAUTHENTICATED);
    }
    if (!can(who.role, 'dashboard')) {
      return loginForm(c, `Role ${who.role} does not grant the dashboard; use an operator or admin token.`, errorStatus.FORBIDDEN);
    }
    const session = await signInToDashboard(deps.pool, who, SESSION_SECONDS);
    setCookie(c, DASHBOARD_COOKIE, session, { ...cookieOptions(c), maxAge: SESSION_SECONDS });
    return c.redirect(`${DASHBOARD_PATH}/`, 303);
  });

  app.post(`${DASHBOARD_PATH}/logout`, async (c) => {
    const session = getCookie(c, DASHBOARD_COOKIE);
    if (session) await signOutOfDashboard(deps.pool, session);
    deleteCookie(c, DASHBOARD_COOKIE, cookieOptions(c));
    return c.redirect(`${DASHBOARD_PATH}/login`, 303);
  });

  const guard = async (c: Context<AuthEnv>, next: () => Promise<void>) => {
    const authorization = c.req.header('Authorization');
    // A bearer token is a guess like any on the API; a stale session cookie is not (a browser keeps
    // sending it until it signs in again), so only the former counts.
    if (authorization !== undefined) refuseIfThrottled(deps.authThrottle, c);
    const bearer = bearerToken(authorization);
    const session = bearer ? undefined : getCookie(c, DASHBOARD_COOKIE);
    const who = bearer ? await authenticateToken(deps.pool, bearer) : session ? await dashboardSessionToken(deps.pool, session) : null;
    if (!who) {
      if (authorization !== undefined) recordAuthFailure(deps.authThrottle, c);
      if (wantsPage(c)) return c.redirect(`${DASHBOARD_PATH}/login`, 303);
      c.header('WWW-Authenticate', 'Bearer');
      throw new FerryError('UNAUTHENTICATED', 'the dashboard needs an operator or admin token (sign in at /dashboard/login)');
    }
    if (!can(who.role, 'dashboard')) {
      throw new FerryError('FORBIDDEN', `role ${who.role} does not grant dashboard`, { permission: 'dashboard', role: who.role });
    }
    c.set('principal', callerOf(who));
    refuseUnservable(c);
    if (!READ_METHODS.has(c.req.method)) {
      if (!can(who.role, 'dashboard.jobs')) {
        throw new FerryError('FORBIDDEN', `role ${who.role} may read the dashboard but not change jobs through it (dashboard.jobs)`, {
          permission: 'dashboard.jobs',
          role: who.role,
        });
      }
      // Recorded once the dashboard answered, with what it did (src/services/dashboard-actions.ts).
      const action = { actor: principalActor(who.principalId), ...(await describeChange(c)) };
      await performDashboardAction(deps.pool, deps.schema ?? PGBOSS_SCHEMA, action, async () => {
        await next();
        return c.res;
      });
      return;
    }
    await next();
  };
  const serve = async (c: Context<AuthEnv>) => withoutOutsideAssets(await dashboard()(c.req.raw));

  app.all(DASHBOARD_PATH, guard, serve);
  app.all(`${DASHBOARD_PATH}/*`, guard, serve);
  return app;
}
