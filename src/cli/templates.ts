/**
 * `ferry templates apply FILE`: sends plan template definitions to a running Ferry (POST
 * /v3/templates). FILE is YAML or JSON holding one definition or a list of them. A changed graph
 * becomes a proposal, live only once a second person approves it and its challenge window passes;
 * an unchanged graph creates nothing, so applying the same file twice is harmless.
 *
 * `ferry templates proposals [list|show|approve|challenge|withdraw]`: the proposals
 * (/v3/template-proposals).
 */
import { readFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import { CliError, type CliCommand } from './command.ts';
import { printedJson, printList } from './format.ts';
import { API_USAGE, apiOptions, apiTarget, callApi } from './movements.ts';

/** The definitions in a file: a YAML/JSON object, a list of them, or several YAML documents. */
export function templateDefinitions(text: string, file: string): unknown[] {
  let values: unknown[];
  if (/\.json$/i.test(file)) {
    try {
      values = [JSON.parse(text)];
    } catch (err) {
      throw new CliError(`${file} is not valid JSON: ${(err as Error).message}`);
    }
  } else {
    const docs = parseAllDocuments(text);
    const broken = docs.find((d) => d.errors.length > 0);
    if (broken) throw new CliError(`${file} is not valid YAML: ${broken.errors[0].message}`);
    values = docs.map((d) => d.toJS());
  }
  const defs = values.flatMap((v) => (Array.isArray(v) ? v : [v])).filter((v) => v !== null && v !== undefined);
  if (defs.length === 0) throw new CliError(`${file} holds no template definition`);
  const bad = defs.findIndex((d) => typeof d !== 'object' || Array.isArray(d));
  if (bad >= 0) throw new CliError(`${file}: definition ${bad + 1} is not an object`);
  return defs;
}

const apply: CliCommand = {
  path: ['templates', 'apply'],
  summary: 'create or update plan templates from a YAML or JSON file',
  usage: `FILE ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'FILE' },
  options: apiOptions,
  async run(ctx) {
    const file = ctx.positionals[0];
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      throw new CliError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    const defs = templateDefinitions(text, file);
    const target = await apiTarget(ctx);
    const results = [];
    for (const def of defs) {
      const saved = await callApi(target, 'POST', '/v3/templates', def);
      results.push(saved);
      if (ctx.flag('json')) continue;
      const key = saved.template?.template_key ?? saved.proposal?.template_key ?? (def as { template_key?: string }).template_key;
      if (saved.proposal) {
        const p = saved.proposal;
        ctx.out(
          `template ${key}: ${saved.created ? 'proposed' : 'already proposed'} (proposal ${p.id}, ${p.state}); ` +
            `it becomes live once approved by someone else and its challenge window passes`,
        );
        continue;
      }
      const version = saved.version?.version;
      ctx.out(`template ${key}: unchanged (version ${version})`);
      const notApplied: string[] = saved.timeout_policy_not_applied ?? [];
      if (notApplied.length > 0) {
        ctx.out(`  note: timeout_policy changes of ${notApplied.join(', ')} are not applied to an unchanged graph`);
      }
    }
    printedJson(ctx, results);
  },
};

const list: CliCommand = {
  path: ['templates', 'list'],
  summary: 'list plan templates with their latest version',
  usage: API_USAGE,
  options: apiOptions,
  async run(ctx) {
    const r = await callApi(await apiTarget(ctx), 'GET', '/v3/templates');
    printList(ctx, r.templates, {
      empty: 'No templates yet (ferry templates apply FILE).',
      columns: ['KEY', 'VERSION', 'UPDATED', 'DESCRIPTION'],
      row: (t: any) => [t.template_key, String(t.latest_version), t.updated_at, t.description ?? ''],
    });
  },
};

// --- Proposals ------------------------------------------------------------------------------------

function proposalLine(p: any): string {
  const when = p.state === 'APPROVED' ? ` challenge window ends ${p.challenge_ends_at}` : p.state === 'PROPOSED' ? ` review ends ${p.review_expires_at}` : '';
  return `${p.id}  ${p.template_key}  ${p.state}  by ${p.proposed_by_name}${p.system ? ' (system)' : ''}${when}`;
}

const proposalsList: CliCommand = {
  path: ['templates', 'proposals'],
  summary: 'list template proposals (newest first)',
  usage: `[--state STATE] [--template KEY] ${API_USAGE}`,
  options: { ...apiOptions, state: { type: 'string' }, template: { type: 'string' } },
  async run(ctx) {
    const q = new URLSearchParams();
    if (ctx.option('state')) q.set('state', ctx.option('state')!.toUpperCase());
    if (ctx.option('template')) q.set('template_key', ctx.option('template')!);
    const r = await callApi((await apiTarget(ctx)), 'GET', `/v3/template-proposals${q.size ? `?${q}` : ''}`);
    if (printedJson(ctx, r)) return;
    if (r.proposals.length === 0) return ctx.out('no template proposals');
    for (const p of r.proposals) ctx.out(proposalLine(p));
  },
};

const proposalShow: CliCommand = {
  path: ['templates', 'proposal'],
  summary: 'show a template proposal: its diff against the live version and its history',
  usage: `ID ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'ID' },
  options: apiOptions,
  async run(ctx) {
    const r = await callApi((await apiTarget(ctx)), 'GET', `/v3/template-proposals/${encodeURIComponent(ctx.positionals[0])}`);
    if (printedJson(ctx, r)) return;
    ctx.out(proposalLine(r.proposal));
    ctx.out(`live version: ${r.live_version ?? 'none'}${r.proposal.reason ? `; reason: ${r.proposal.reason}` : ''}`);
    const d = r.diff;
    for (const k of d.nodes.added) ctx.out(`  + node ${k}`);
    for (const k of d.nodes.removed) ctx.out(`  - node ${k}`);
    for (const c of d.nodes.changed) ctx.out(`  ~ node ${c.node_key}: ${c.fields.map((f: any) => f.field).join(', ')}`);
    for (const e of d.edges.added) ctx.out(`  + edge ${e.from} -> ${e.to}`);
    for (const e of d.edges.removed) ctx.out(`  - edge ${e.from} -> ${e.to}`);
    if (d.description) ctx.out('  ~ description');
    for (const t of r.history) ctx.out(`  #${t.seq} ${t.at} ${t.event} ${t.from || '-'} -> ${t.to} by ${t.actor_name}`);
  },
};

const decide = (verb: 'approve' | 'challenge' | 'withdraw', summary: string): CliCommand => ({
  path: ['templates', verb],
  summary,
  usage: `ID${verb === 'challenge' ? ' --reason TEXT' : ''} ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'ID' },
  options: verb === 'challenge' ? { ...apiOptions, reason: { type: 'string' } } : apiOptions,
  async run(ctx) {
    const body = verb === 'challenge' ? { reason: ctx.option('reason') ?? '' } : {};
    if (verb === 'challenge' && !body.reason?.trim()) throw new CliError('a challenge needs --reason TEXT');
    const r = await callApi((await apiTarget(ctx)), 'POST', `/v3/template-proposals/${encodeURIComponent(ctx.positionals[0])}/${verb}`, body);
    if (!printedJson(ctx, r)) ctx.out(proposalLine(r));
  },
});

export const templateCommands: CliCommand[] = [
  apply,
  list,
  proposalsList,
  proposalShow,
  decide('approve', 'approve a template proposal (not your own); its challenge window starts'),
  decide('challenge', 'challenge an approved template proposal within its challenge window'),
  decide('withdraw', 'withdraw your own open template proposal'),
];
