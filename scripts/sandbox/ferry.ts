import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { withCliDatabase } from '../../src/cli/database.ts';
import { installSystemTemplate } from '../../src/services/template-proposals.ts';
import { createDestination } from '../../src/services/callback-destinations.ts';
import { loadConfig } from '../../src/config.ts';
import { withTransaction } from '../../src/persistence/db.ts';
import { parseTemplateDefinition } from '../../src/plan/template-schema.ts';
import { createToken } from '../../src/persistence/tokens.ts';
import type { SandboxComponent, SandboxContext } from './component.ts';

const REPO = resolve(fileURLToPath(new URL('../..', import.meta.url)));

export interface SandboxFerry extends SandboxComponent {
  url(): string;
  tokens(): Record<'requester' | 'approver' | 'admin', string>;
}

/**
 * Ferry itself, configured for what the earlier components brought up: writes the
 * FERRY_CONFIG_FILE into the data folder, starts `src/main.ts` (embedded PostgreSQL in the data
 * folder unless DATABASE_URL is set; its log goes to ferry.log there), creates a requester, an
 * approver and an admin token, and installs the context's templates through the API.
 */
export function ferryServer(opts: { port: string }): SandboxFerry {
  let child: ChildProcess | undefined;
  let exited: Promise<unknown> | undefined;
  let url = '';
  let tokens: Record<'requester' | 'approver' | 'admin', string> | undefined;
  return {
    name: 'ferry',
    async start(ctx: SandboxContext) {
      mkdirSync(ctx.dataDir, { recursive: true });
      const configPath = join(ctx.dataDir, 'sandbox-config.yaml');
      writeFileSync(configPath, `# Written by npm run sandbox; rewritten at every start.\n${stringify({ evm: ctx.config, ...ctx.sections, ...(ctx.cex?.accounts.length ? { cex: ctx.cex } : {}) })}`);
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        FERRY_DATA_DIR: ctx.dataDir,
        FERRY_CONFIG_FILE: configPath,
        PORT: opts.port,
        // Not the port of `npm start`'s embedded server: both may run side by side.
        FERRY_EMBEDDED_PG_PORT: process.env.FERRY_EMBEDDED_PG_PORT ?? '54331',
        HOST: '127.0.0.1',
        FERRY_LOG_LEVEL: process.env.FERRY_LOG_LEVEL ?? 'info',
        ...ctx.ferryEnv,
      };
      const logFile = createWriteStream(join(ctx.dataDir, 'ferry.log'), { flags: 'a' });
      child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] });
      exited = new Promise((r) => child!.once('exit', r));
      child.stderr!.pipe(logFile);
      url = await new Promise<string>((resolveUrl, reject) => {
        let rest = '';
        child!.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
          logFile.write(chunk);
          rest += chunk;
          const lines = rest.split('\n');
          rest = lines.pop()!;
          for (const line of lines) {
            try {
              const l = JSON.parse(line) as { msg?: string; url?: string; progress?: boolean };
              // Ferry's start-up progress (the first initdb, migrations) is shown, not only logged.
              if (l.progress && l.msg) ctx.log(`ferry: ${l.msg}`);
              if (l.url && l.msg?.startsWith('ferry listening')) resolveUrl(l.url);
            } catch {
              // not a log line
            }
          }
        });
        void exited!.then(() => reject(new Error(`ferry exited during start; see ${join(ctx.dataDir, 'ferry.log')}`)));
      });
      ctx.facts.ferry_url = url;
      ctx.facts.ferry_log = join(ctx.dataDir, 'ferry.log');

      const stamp = Date.now().toString(36);
      tokens = await withCliDatabase({ ...env }, (db) =>
        withTransaction(db.pool, async (c) => ({
          requester: (await createToken(c, { name: `sandbox-requester-${stamp}`, role: 'requester' })).token,
          approver: (await createToken(c, { name: `sandbox-approver-${stamp}`, role: 'approver' })).token,
          admin: (await createToken(c, { name: `sandbox-admin-${stamp}`, role: 'admin' })).token,
        })),
      );
      // The sandbox's templates are Ferry's own: system proposals, finalized at once and audited as
      // such (a person's template change goes through review: docs/operations.md).
      await withCliDatabase({ ...env }, async (db) => {
        for (const template of ctx.templates) {
          try {
            await installSystemTemplate(
              { pool: db.pool, config: { templateReviewWindowSeconds: 0, templateChallengeWindowSeconds: 0 } },
              parseTemplateDefinition(template),
              'system:sandbox',
            );
          } catch (err) {
            throw new Error(`template ${String(template.template_key)} was refused: ${(err as Error).message}`);
          }
        }
      });
      // The callback destinations, through their service (audited as the sandbox's).
      if (ctx.callbackDestinations?.length) {
        const config = loadConfig(env);
        await withCliDatabase({ ...env }, async (db) => {
          for (const d of ctx.callbackDestinations!) {
            const made = await createDestination({ pool: db.pool, config }, { actor: 'system:sandbox', name: d.name, url: d.url, nodeEvents: d.nodeEvents });
            d.secret?.(made.secret);
          }
        });
      }
    },
    async stop() {
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child?.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    },
    url: () => url,
    tokens: () => {
      if (!tokens) throw new Error('ferry is not started');
      return tokens;
    },
  };
}
