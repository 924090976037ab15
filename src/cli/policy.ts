/**
 * `ferry policy ...`: the treasury policy (docs/policy.md) through a running Ferry's API.
 *
 *   ferry policy book                         the address book
 *   ferry policy book-put --name N ...        propose a new or changed entry
 *   ferry policy book-remove NAME             propose removing an entry
 *   ferry policy rules                        the live rule set
 *   ferry policy propose-rules FILE           propose a rule set (YAML or JSON)
 *   ferry policy proposals [--state S]        the proposals
 *   ferry policy proposal ID                  one proposal and its history
 *   ferry policy approve|challenge|reject|withdraw|finalize ID
 *   ferry policy test --template KEY --intent JSON [--requester NAME] [--rules FILE]
 *
 * Every change is a proposal: another principal approves it, and it is live once its cool-down
 * passes (unless challenged).
 */
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { CliError, UsageError, type CliCommand, type CliContext } from './command.ts';
import { printedJson, printList } from './format.ts';
import { API_USAGE, apiOptions, apiTarget, callApi, jsonObjectOption } from './movements.ts';

function proposalLine(p: any): string {
  const when = p.state === 'APPROVED' ? ` live from ${p.challenge_ends_at} unless challenged` : p.state === 'PROPOSED' ? ` review ends ${p.review_expires_at}` : '';
  const what = p.subject_kind === 'rule_set' ? `rule set (on version ${p.change?.base_version ?? '?'})` : `book ${p.change?.op ?? ''} ${p.subject}`;
  return `${p.id}  ${what}  ${p.state}  by ${p.proposed_by_name}${when}${p.reason ? `  reason: ${p.reason}` : ''}`;
}

async function readObjectFile(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  try {
    return /\.json$/i.test(file) ? JSON.parse(text) : parse(text);
  } catch (err) {
    throw new CliError(`${file} is not valid ${/\.json$/i.test(file) ? 'JSON' : 'YAML'}: ${(err as Error).message}`);
  }
}

const book: CliCommand = {
  path: ['policy', 'book'],
  summary: 'list the address book',
  usage: API_USAGE,
  options: apiOptions,
  async run(ctx) {
    const r = await callApi(await apiTarget(ctx), 'GET', '/v3/policy/address-book');
    printList(ctx, r.entries, {
      empty: 'The address book is empty (ferry policy book-put).',
      columns: ['NAME', 'NETWORK', 'KIND', 'ADDRESS', 'TAG', 'OWNER'],
      row: (e: any) => [e.name, e.network, e.kind, e.address, e.tag ?? '', e.owner],
    });
  },
};

const bookPut: CliCommand = {
  path: ['policy', 'book-put'],
  summary: 'propose a new or changed address book entry',
  usage: `--name NAME --network NET --address ADDR [--tag TAG] --owner OWNER --kind internal|external [--notes TEXT] ${API_USAGE}`,
  options: {
    ...apiOptions,
    name: { type: 'string' },
    network: { type: 'string' },
    address: { type: 'string' },
    tag: { type: 'string' },
    owner: { type: 'string' },
    kind: { type: 'string' },
    notes: { type: 'string' },
  },
  async run(ctx) {
    for (const o of ['name', 'network', 'address', 'owner', 'kind']) if (!ctx.option(o)) throw new UsageError(`--${o} is required`);
    const body = {
      name: ctx.option('name'),
      network: ctx.option('network'),
      address: ctx.option('address'),
      tag: ctx.option('tag') ?? null,
      owner: ctx.option('owner'),
      kind: ctx.option('kind'),
      notes: ctx.option('notes') ?? null,
    };
    const p = await callApi(await apiTarget(ctx), 'POST', '/v3/policy/address-book', body);
    if (!printedJson(ctx, p)) ctx.out(`proposed: ${proposalLine(p)}\nAnother principal approves it with: ferry policy approve ${p.id}`);
  },
};

const bookRemove: CliCommand = {
  path: ['policy', 'book-remove'],
  summary: 'propose removing an address book entry',
  usage: `NAME ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'NAME' },
  options: apiOptions,
  async run(ctx) {
    const p = await callApi(await apiTarget(ctx), 'POST', `/v3/policy/address-book/${encodeURIComponent(ctx.positionals[0])}/remove`, {});
    if (!printedJson(ctx, p)) ctx.out(`proposed: ${proposalLine(p)}`);
  },
};

/** Per what a limit keeps its sums, in words (" per destination, per source"). */
/** A limit's unit: its asset, or its currency (of its assets, when it lists them). */
function limitUnitOf(l: any): string {
  return l.currency ? `${l.currency}${l.assets ? ` of ${l.assets.join('|')}` : ''}` : l.asset;
}

function perWhat(l: any): string {
  return [l.per_destination && ' per destination', l.per_source && ' per source', l.per_requester && ' per requester'].filter(Boolean).join(',');
}

function ruleLine(r: any): string {
  const m = r.match ?? {};
  const parts = [
    m.templates && `template ${m.templates.join('|')}`,
    m.lanes && `lane ${m.lanes.join('|')}`,
    m.assets && `asset ${m.assets.join('|')}`,
    m.sources && `source ${m.sources.join('|')}`,
    m.destination && `destination ${JSON.stringify(m.destination)}`,
    m.amount && `amount${m.amount.at_least ? ` >= ${m.amount.at_least}` : ''}${m.amount.below ? ` < ${m.amount.below}` : ''}${m.amount.currency ? ` ${m.amount.currency}` : ''}`,
    m.requesters && `requester ${m.requesters.join('|')}`,
  ].filter(Boolean);
  const a = r.action;
  const action = a.type === 'block' ? `block (${a.reason})` : a.type === 'require_approvals' ? `require ${a.approvals} approvals${a.from ? ` from ${a.from.join(', ')}` : ''}` : 'allow';
  return `  ${r.id}: ${parts.length ? parts.join(', ') : 'any movement'} -> ${action}`;
}

const rules: CliCommand = {
  path: ['policy', 'rules'],
  summary: 'show the live rule set and velocity limits',
  usage: API_USAGE,
  options: apiOptions,
  async run(ctx) {
    const r = await callApi(await apiTarget(ctx), 'GET', '/v3/policy/rules');
    if (printedJson(ctx, r)) return;
    if (r.version === null) return ctx.out('No rule set is live: movements are not policy-checked (ferry policy propose-rules FILE).');
    ctx.out(`rule set version ${r.version} (first match wins; no match: refused)`);
    for (const rule of r.rules) ctx.out(ruleLine(rule));
    for (const l of r.limits) {
      ctx.out(`  limit ${l.id}: at most ${l.max_amount} ${limitUnitOf(l)} per ${l.window_seconds} s${perWhat(l)}`);
    }
  },
};

const proposeRules: CliCommand = {
  path: ['policy', 'propose-rules'],
  summary: 'propose a new rule set version from a YAML or JSON file ({rules, limits})',
  usage: `FILE ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'FILE' },
  options: apiOptions,
  async run(ctx) {
    const body = await readObjectFile(ctx.positionals[0]);
    const p = await callApi(await apiTarget(ctx), 'POST', '/v3/policy/rules', body);
    if (!printedJson(ctx, p)) ctx.out(`proposed: ${proposalLine(p)}\nAnother principal approves it with: ferry policy approve ${p.id}`);
  },
};

const proposals: CliCommand = {
  path: ['policy', 'proposals'],
  summary: 'list policy proposals (newest first)',
  usage: `[--state STATE] [--kind address_book|rule_set] ${API_USAGE}`,
  options: { ...apiOptions, state: { type: 'string' }, kind: { type: 'string' } },
  async run(ctx) {
    const q = new URLSearchParams();
    if (ctx.option('state')) q.set('state', ctx.option('state')!.toUpperCase());
    if (ctx.option('kind')) q.set('kind', ctx.option('kind')!);
    const r = await callApi(await apiTarget(ctx), 'GET', `/v3/policy/proposals${q.size ? `?${q}` : ''}`);
    if (printedJson(ctx, r)) return;
    if (r.proposals.length === 0) return ctx.out('no policy proposals');
    for (const p of r.proposals) ctx.out(proposalLine(p));
  },
};

const proposal: CliCommand = {
  path: ['policy', 'proposal'],
  summary: 'show a policy proposal: what it changes and its history',
  usage: `ID ${API_USAGE}`,
  positionals: { min: 1, max: 1, names: 'ID' },
  options: apiOptions,
  async run(ctx) {
    const r = await callApi(await apiTarget(ctx), 'GET', `/v3/policy/proposals/${encodeURIComponent(ctx.positionals[0])}`);
    if (printedJson(ctx, r)) return;
    ctx.out(proposalLine(r.proposal));
    const c = r.proposal.change;
    if (c.op === 'replace') {
      for (const rule of c.rules) ctx.out(ruleLine(rule));
      for (const l of c.limits) ctx.out(`  limit ${l.id}: at most ${l.max_amount} ${limitUnitOf(l)} per ${l.window_seconds} s${perWhat(l)}`);
    } else if (c.op === 'put') {
      const e = c.entry;
      ctx.out(`  ${e.name}: ${e.kind} ${e.network} ${e.address}${e.tag ? ` tag ${e.tag}` : ''} owned by ${e.owner}`);
    }
    for (const t of r.history) ctx.out(`  #${t.seq} ${t.at} ${t.event} ${t.from || '-'} -> ${t.to} by ${t.actor_name}`);
  },
};

const decide = (verb: 'approve' | 'challenge' | 'reject' | 'withdraw' | 'finalize', summary: string): CliCommand => {
  const needsReason = verb === 'challenge' || verb === 'reject';
  return {
    path: ['policy', verb],
    summary,
    usage: `ID${needsReason ? ' --reason TEXT' : ''} ${API_USAGE}`,
    positionals: { min: 1, max: 1, names: 'ID' },
    options: needsReason ? { ...apiOptions, reason: { type: 'string' } } : apiOptions,
    async run(ctx) {
      const body = needsReason ? { reason: ctx.option('reason') ?? '' } : {};
      if (needsReason && !(body as { reason: string }).reason.trim()) throw new UsageError(`${verb} needs --reason TEXT`);
      const r = await callApi(await apiTarget(ctx), 'POST', `/v3/policy/proposals/${encodeURIComponent(ctx.positionals[0])}/${verb}`, body);
      if (!printedJson(ctx, r)) ctx.out(proposalLine(r));
    },
  };
};

function verdictLines(label: string, v: any): string[] {
  const rule = v.rule_id ? `rule ${v.rule_id}` : v.action === 'no_policy' ? 'no rule set' : 'no rule matches';
  const lines = [
    `${label}${v.rule_set_version === null ? '' : ` (version ${v.rule_set_version})`}: ${v.outcome === 'allowed' ? 'ALLOWED' : 'REFUSED'} by ${rule}` +
      (v.outcome === 'allowed' ? `; needs ${v.approvals_required} approval${v.approvals_required === 1 ? '' : 's'}${v.approvers_from ? ` from ${v.approvers_from.join(', ')}` : ''}` : ''),
  ];
  if (v.outcome === 'refused') lines.push(`  ${v.code}: ${v.message}`);
  for (const p of v.prices ?? []) {
    lines.push(p.answer !== undefined
      ? `  price ${p.asset}/${p.currency}: ${p.answer} (${p.decimals} decimals), round ${p.round_id} of ${p.updated_at}, feed ${p.feed}`
      : `  price ${p.asset}/${p.currency}: none (${p.code})`);
  }
  for (const l of v.limits) {
    lines.push(`  limit ${l.limit_id}: ${l.used} used of ${l.max_amount}${l.currency ? ` ${l.currency}` : ''} in ${l.window_seconds} s${l.destination ? ` to ${l.destination}` : ''}${l.source ? ` from ${l.source}` : ''}${l.requester ? ` requested by ${l.requester}` : ''}; with this movement ${l.total ?? '?'}${l.price_code ? ` (no price: ${l.price_code})` : l.exceeded ? ' (EXCEEDED)' : ''}`);
  }
  return lines;
}

const test: CliCommand = {
  path: ['policy', 'test'],
  summary: 'say what the live rule set, and the proposed one, would do with a movement (nothing is created)',
  usage: `--template KEY --intent JSON [--requester NAME] [--rules FILE] ${API_USAGE}`,
  options: { ...apiOptions, template: { type: 'string' }, intent: { type: 'string' }, requester: { type: 'string' }, rules: { type: 'string' } },
  async run(ctx: CliContext) {
    const template = ctx.option('template');
    if (!template) throw new UsageError('--template is required');
    const intent = jsonObjectOption(ctx, 'intent');
    if (!intent) throw new UsageError('--intent is required (a JSON object, e.g. \'{"asset":"USDC","amount":"100","destination":"0x..."}\')');
    const file = ctx.option('rules');
    const body = {
      template_key: template,
      intent,
      ...(ctx.option('requester') ? { requester: ctx.option('requester') } : {}),
      ...(file ? { rule_set: await readObjectFile(file) } : {}),
    };
    const r = await callApi(await apiTarget(ctx), 'POST', '/v3/policy/test', body);
    if (printedJson(ctx, r)) return;
    const f = r.facts;
    ctx.out(
      `movement: template ${f.templateKey}, lanes ${f.lanes.join(',') || '-'}, sources ${(f.sources ?? []).join(',') || '-'}, ${f.amount ?? '?'} ${f.asset ?? '?'} to ` +
        `${f.destination ? f.destination.address : '-'} (${f.entry ? `book entry ${f.entry.name}, ${f.entry.kind}` : 'not in the address book'}), requested by ${f.requester.name ?? f.requester.actor}`,
    );
    for (const line of verdictLines('live', r.live)) ctx.out(line);
    if (r.proposed) for (const line of verdictLines(file ? 'given rule set' : `proposed ${r.proposed.proposal_id} (${r.proposed.proposal_state})`, r.proposed)) ctx.out(line);
    else ctx.out('proposed: no open rule set proposal');
  },
};

export const policyCommands: CliCommand[] = [
  book,
  bookPut,
  bookRemove,
  rules,
  proposeRules,
  proposals,
  proposal,
  decide('approve', 'approve a policy proposal (not your own); its cool-down starts'),
  decide('challenge', 'challenge an approved policy proposal within its cool-down'),
  decide('reject', 'reject a proposed policy change before it is approved'),
  decide('withdraw', 'withdraw your own open policy proposal'),
  decide('finalize', 'make an approved policy proposal live once its cool-down has passed'),
  test,
];
