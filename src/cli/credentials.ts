import { loadConfig } from '../config.ts';
import type { CredentialProposalRow } from '../persistence/credential-proposals.ts';
import type { Pool } from '../persistence/db.ts';
// The service (its machine, persistence and audit) loads in the commands that use it.
const service = () => import('../services/credential-proposals.ts');
import { UsageError, type CliCommand, type CliContext } from './command.ts';
import { printedJson, printList } from './format.ts';
import { operatorName } from './operator.ts';

/**
 * `ferry credentials list | confirm | reject`: the credential proposals admins made through the API
 * (a principal, a token for someone else, a token that approves or administers). The CLI works
 * with database access, the root of trust, so it may be the second person: in a deployment with a
 * single admin, whoever holds the database confirms here, audited as `cli:<user>` (or `--by`).
 */

const ID = { min: 1, max: 1, names: 'PROPOSAL_ID' };

function describe(p: CredentialProposalRow): string {
  const r = p.request as { role?: string; name: string; kind?: string };
  return p.operation === 'principal.create' ? `principal ${r.name} (${r.kind})` : `token ${r.name} of ${p.subject} (role ${r.role})`;
}

const deps = (ctx: CliContext, pool: Pool) => ({ pool, config: loadConfig(ctx.env) });

const list: CliCommand = {
  path: ['credentials', 'list'],
  summary: 'list credential proposals waiting for (or decided by) a second admin',
  usage: '[--all] [--json]',
  options: { all: { type: 'boolean' }, json: { type: 'boolean' } },
  async run(ctx) {
    const { listCredentialProposalRows } = await service();
    const rows = await ctx.withDatabase(({ pool }) => listCredentialProposalRows(pool, { state: ctx.flag('all') ? undefined : 'PROPOSED', limit: 200 }));
    printList(ctx, rows, {
      empty: 'No credential proposals.',
      columns: ['ID', 'STATE', 'CHANGE', 'PROPOSED BY', 'REVIEW ENDS'],
      row: (p: CredentialProposalRow) => [p.id, p.proposal_state, describe(p), p.proposed_by, p.review_expires_at.toISOString()],
    });
  },
};

const confirm: CliCommand = {
  path: ['credentials', 'confirm'],
  summary: "confirm an admin's credential proposal as the second person; a token's secret is shown once (audited)",
  usage: 'PROPOSAL_ID [--by OPERATOR] [--json]',
  positionals: ID,
  options: { by: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    const id = ctx.positionals[0];
    if (!id) throw new UsageError('give the proposal id');
    const actor = operatorName(ctx);
    const { confirmCredentialProposal } = await service();
    const r = await ctx.withDatabase(({ pool }) => confirmCredentialProposal(deps(ctx, pool), id, actor));
    if (printedJson(ctx, { proposal: r.proposal, principal: r.principal, token: r.token })) return;
    if (r.principal) ctx.out(`Confirmed: created principal "${r.principal.name}" (${r.principal.kind}, id ${r.principal.id}).`);
    if (r.token) {
      ctx.out(`Confirmed: created token "${r.token.name}" of principal "${r.token.principal_name}" (role ${r.token.role}, id ${r.token.id}):`);
      ctx.out('');
      ctx.out(`  ${r.token.token}`);
      ctx.out('');
      ctx.out('Hand it to its principal now: Ferry keeps only its hash and cannot show it again.');
    }
  },
};

const reject: CliCommand = {
  path: ['credentials', 'reject'],
  summary: 'reject a credential proposal; nothing is created (audited)',
  usage: 'PROPOSAL_ID [--reason TEXT] [--by OPERATOR] [--json]',
  positionals: ID,
  options: { reason: { type: 'string' }, by: { type: 'string' }, json: { type: 'boolean' } },
  async run(ctx) {
    const id = ctx.positionals[0];
    if (!id) throw new UsageError('give the proposal id');
    const actor = operatorName(ctx);
    const { rejectCredentialProposal } = await service();
    const row = await ctx.withDatabase(({ pool }) => rejectCredentialProposal(deps(ctx, pool), id, actor, ctx.option('reason') ?? null));
    if (!printedJson(ctx, row)) ctx.out(`Rejected credential proposal ${row.id} (${describe(row)}).`);
  },
};

export const credentialCommands: CliCommand[] = [list, confirm, reject];
