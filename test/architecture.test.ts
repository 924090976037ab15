/**
 * The "may not" column of docs/design.md's "Where code lives", enforced on the imports of src/.
 * Each rule reads the imports (static, re-exports and dynamic) of every file of a folder and lists
 * each offending import with its file, so a change that crosses a line fails here naming it.
 * Type-only imports share shapes, not behaviour: rules about I/O and writes let them through.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = join(ROOT, 'src');

interface Import {
  /** The importing file, relative to src/. */
  file: string;
  /** A package name (`pg`, `node:fs`, `viem/utils`), or a path relative to src/ (`persistence/db.ts`). */
  target: string;
  /** Whether it leaves src/ through a relative path (test/, scripts/). */
  outside: boolean;
  /** The names imported, without `type` (empty for `import * as`, side-effect and dynamic imports). */
  names: string[];
  /** Those of `names` imported as types. */
  typeNames: string[];
  typeOnly: boolean;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return entry.endsWith('.ts') ? [path] : [];
  });
}

const IMPORT = /(?:^|\n)\s*(import|export)\s+(type\s+)?([^;'"]*?)\s*from\s*['"]([^'"]+)['"]/g;
const BARE = /(?:^|\n)\s*import\s+['"]([^'"]+)['"]/g;
const DYNAMIC = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

function importsOf(path: string): Import[] {
  // Comments may quote import lines; only code counts.
  const text = readFileSync(path, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
  const file = relative(SRC, path);
  const locate = (spec: string) => {
    if (!spec.startsWith('.')) return { target: spec, outside: false };
    const abs = resolve(dirname(path), spec);
    const rel = relative(SRC, abs);
    return { target: rel, outside: rel.startsWith('..') };
  };
  const out: Import[] = [];
  for (const m of text.matchAll(IMPORT)) {
    const clause = m[3];
    const braces = /\{([\s\S]*)\}/.exec(clause)?.[1] ?? '';
    const specifiers = braces
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const bare = (spec: string) => spec.replace(/^type\s+/, '').split(/\s+as\s+/)[0];
    const names = specifiers.map(bare);
    const typeNames = specifiers.filter((spec) => m[2] !== undefined || spec.startsWith('type ')).map(bare);
    const defaultOrStar = clause.replace(/\{[\s\S]*\}/, '').replace(/,/g, '').trim();
    const typeOnly = m[2] !== undefined || (specifiers.length > 0 && defaultOrStar === '' && specifiers.every((s) => s.startsWith('type ')));
    out.push({ file, ...locate(m[4]), names, typeNames, typeOnly });
  }
  for (const m of text.matchAll(BARE)) out.push({ file, ...locate(m[1]), names: [], typeNames: [], typeOnly: false });
  for (const m of text.matchAll(DYNAMIC)) out.push({ file, ...locate(m[1]), names: [], typeNames: [], typeOnly: false });
  return out;
}

const all = sourceFiles(SRC).flatMap(importsOf);
const folderOf = (path: string) => (path.includes('/') ? path.slice(0, path.indexOf('/')) : '');
const inFolders = (folders: string[]) => all.filter((i) => folders.includes(folderOf(i.file)));
const intoFolders = (i: Import, folders: string[]) => !i.outside && i.target.includes('/') && folders.includes(folderOf(i.target));
const show = (list: Import[]) => list.map((i) => `${i.file} -> ${i.target}${i.names.length ? ` {${i.names.join(', ')}}` : ''}`);

test('the parser sees the imports (a rule over nothing would pass whatever the code did)', () => {
  assert.ok(all.length > 500, `${all.length} imports read`);
  const dispatcher = all.filter((i) => i.file === 'actors/dispatcher.ts');
  assert.ok(dispatcher.some((i) => i.target === 'persistence/claims.ts' && i.names.length > 0), 'a multi-name relative import is read');
  assert.ok(all.some((i) => i.typeOnly) && all.some((i) => !i.typeOnly), 'type-only imports are told apart');
});

test('machines/ do no I/O and do not read the clock: they import xstate and each other, and types', () => {
  const bad = inFolders(['machines']).filter((i) => !i.typeOnly && !(i.target === 'xstate' || (!i.outside && folderOf(i.target) === 'machines')));
  assert.deepEqual(show(bad), []);
  const clock = sourceFiles(join(SRC, 'machines')).filter((f) => /\bDate\.now\(|new Date\(\s*\)|performance\.now\(|Math\.random\(/.test(readFileSync(f, 'utf8')));
  assert.deepEqual(clock.map((f) => relative(SRC, f)), [], 'time and randomness come in with the events');
});

test('plan/ and policy/ are pure: no database, network, file or process access', () => {
  const pure = new Set(['zod', 'viem', 'viem/utils', 'cron-parser', 'node:crypto']);
  const pureRoot = new Set(['errors.ts', 'ids.ts']);
  const bad = inFolders(['plan', 'policy']).filter((i) => {
    if (i.typeOnly) return false;
    if (i.outside) return true;
    if (!i.target.includes('.ts')) return !pure.has(i.target);
    return !(['plan', 'policy'].includes(folderOf(i.target)) || pureRoot.has(i.target));
  });
  assert.deepEqual(show(bad), []);
});

test('persistence/ calls no machine and no provider: it knows machine state names and types, nothing else of them', () => {
  const upper = ['durable', 'actors', 'sweeps', 'queue', 'services', 'http', 'cli', 'executors', 'callbacks', 'balances', 'hosts', 'demo'];
  const bad = inFolders(['persistence']).filter(
    (i) => !i.typeOnly && (intoFolders(i, upper) || (intoFolders(i, ['machines']) && !i.names.every((n) => i.typeNames.includes(n) || /States$/.test(n)))),
  );
  assert.deepEqual(show(bad), []);
});

test("executors/ answer and never write Ferry's tables: from persistence only the lanes' own tables and the connection", () => {
  // The sim ledger and the EVM nonce reservations are the lanes' own state; db.ts gives the pool and
  // transactions; infra-errors.ts classifies database faults; an audit entry's shape is a type.
  const laneOwned = new Set(['persistence/db.ts', 'persistence/sim-ledger.ts', 'persistence/evm-nonces.ts', 'persistence/infra-errors.ts']);
  // A lane definition (<lane>/lane.ts) names the sweeps it brings; a sweep writes Ferry's tables, so
  // it lives in sweeps/ and the definition loads it when it runs.
  const sweepOfLane = (i: Import) => /^executors\/[a-z0-9]+\/lane\.ts$/.test(i.file) && intoFolders(i, ['sweeps']);
  const bad = inFolders(['executors']).filter(
    (i) =>
      !i.typeOnly &&
      !sweepOfLane(i) &&
      (intoFolders(i, ['durable', 'actors', 'sweeps', 'queue', 'services', 'http', 'cli', 'callbacks', 'hosts']) || (intoFolders(i, ['persistence']) && !laneOwned.has(i.target))),
  );
  assert.deepEqual(show(bad), []);
});

test('http/ and cli/ open no transaction and write no rows: they call services', () => {
  const writes = /^(withTransaction$|(insert|update|delete|upsert|write|mark|record|set|end|revoke|append|claim|lock|promote|deliver)([A-Z]|$))/;
  const bad = inFolders(['http', 'cli']).filter((i) => !i.typeOnly && intoFolders(i, ['persistence']) && i.names.some((n) => writes.test(n)));
  assert.deepEqual(show(bad), []);
});

test("hosts/ serve a remote executor or signer and never reach Ferry's database", () => {
  const bad = inFolders(['hosts']).filter((i) => !i.typeOnly && (intoFolders(i, ['persistence', 'services', 'actors', 'sweeps', 'queue', 'http', 'cli']) || i.target === 'pg'));
  assert.deepEqual(show(bad), []);
});

test('nothing below the entry points imports them, and nothing in src/ imports test/ or scripts/', () => {
  const below = ['machines', 'plan', 'policy', 'persistence', 'durable', 'services', 'actors', 'sweeps', 'executors', 'callbacks', 'balances'];
  const bad = inFolders(below).filter((i) => !i.typeOnly && (intoFolders(i, ['http', 'cli']) || i.target === 'hono' || i.target.startsWith('@hono/')));
  assert.deepEqual(show(bad), []);
  assert.deepEqual(show(all.filter((i) => i.outside)), []);
});

test('actors/ holds the runtime and its actors: of sweeps/ and the queue consumer, only the runtime imports them (it starts them); nothing below the entry points imports queue/', () => {
  const intoSweepsOrQueue = inFolders(['actors']).filter((i) => !i.typeOnly && intoFolders(i, ['sweeps', 'queue']) && i.file !== 'actors/runtime.ts');
  assert.deepEqual(show(intoSweepsOrQueue), []);
  const below = ['machines', 'plan', 'policy', 'persistence', 'services', 'sweeps', 'executors', 'callbacks', 'balances'];
  assert.deepEqual(show(inFolders(below).filter((i) => !i.typeOnly && intoFolders(i, ['queue']))), []);
  // The rule sees something: the runtime does start both.
  assert.ok(all.some((i) => i.file === 'actors/runtime.ts' && i.target === 'sweeps/sweeps.ts'));
  assert.ok(all.some((i) => i.file === 'actors/runtime.ts' && i.target === 'queue/movement-queue.ts'));
});

test('services/ sit below the workers and the entry points: they import no actor, sweep, queue consumer or entry point, not even a type', () => {
  // The workers and the entry points call the services; what both need of an executor's answer
  // (its outcome, its artifacts, an attempt's versions) lives below them, in executors/records.ts.
  const bad = inFolders(['services']).filter((i) => intoFolders(i, ['actors', 'sweeps', 'queue', 'http', 'cli', 'hosts', 'demo']));
  assert.deepEqual(show(bad), []);
  // The rule sees something: the cancel service reads executor answers through the lower module.
  assert.ok(all.some((i) => i.file === 'services/movement-cancel.ts' && i.target === 'executors/records.ts' && i.names.includes('outcomeOf')));
});

test('durable/ drives the machines over rows below the services: it imports no service, actor, sweep or entry point', () => {
  const bad = inFolders(['durable']).filter((i) => !i.typeOnly && intoFolders(i, ['services', 'actors', 'sweeps', 'queue', 'http', 'cli', 'executors', 'hosts', 'demo']));
  assert.deepEqual(show(bad), []);
  // The rule sees something: the services and the actors both drive their machines through it.
  assert.ok(all.some((i) => i.file.startsWith('services/') && i.target === 'durable/transition.ts'));
  assert.ok(all.some((i) => i.file.startsWith('services/') && i.target === 'durable/row-machine.ts'));
  assert.ok(all.some((i) => i.file.startsWith('actors/') && i.target === 'durable/transition.ts'));
});

test("every folder of src/ has its row in design.md's \"Where code lives\"", () => {
  const design = readFileSync(join(ROOT, 'docs/design.md'), 'utf8');
  const section = design.slice(design.indexOf('## Where code lives'), design.indexOf('## Safety rules'));
  const folders = readdirSync(SRC).filter((e) => statSync(join(SRC, e)).isDirectory());
  assert.ok(folders.length >= 10);
  assert.deepEqual(
    folders.filter((f) => !section.includes(`\`${f}/\``)),
    [],
  );
});
