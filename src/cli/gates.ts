/**
 * `ferry gates confirm|skip`: a person operates a READY manual gate of a running movement through
 * a running Ferry's HTTP API, with the token's principal (never the movement's requester; never one
 * of its approvers when the gate says so). See docs/operations.md, "Manual gates".
 */
import { isUuid } from '../ids.ts';
import { UsageError, type CliCommand, type CliContext } from './command.ts';
import { printedJson } from './format.ts';
import { API_USAGE, apiOptions, apiTarget, callApi } from './movements.ts';

function movementArg(ctx: CliContext): string {
  const v = ctx.positionals[0];
  if (!isUuid(v)) throw new UsageError(`MOVEMENT must be a UUID, got "${v}"`);
  return v;
}

const gate = (op: 'confirm' | 'skip'): CliCommand => {
  const field = op === 'confirm' ? 'note' : 'reason';
  return {
    path: ['gates', op],
    summary:
      op === 'confirm'
        ? 'confirm a READY manual gate with a note (what you checked): the gate completes and the movement goes on'
        : 'skip a READY manual gate with a reason: the gate is skipped and the movement goes on',
    usage: `MOVEMENT --node KEY --${field} TEXT ${API_USAGE}`,
    positionals: { min: 1, max: 1, names: 'MOVEMENT' },
    options: { ...apiOptions, node: { type: 'string' }, [field]: { type: 'string' } },
    async run(ctx) {
      const id = movementArg(ctx);
      const node = ctx.option('node');
      const text = ctx.option(field);
      if (!node || !text) throw new UsageError(`--node and --${field} are required`);
      const r = await callApi(await apiTarget(ctx), 'POST', `/v3/movements/${id}/gates/${encodeURIComponent(node)}/${op}`, { [field]: text });
      if (printedJson(ctx, r)) return;
      const n = (r.nodes as Array<{ node_key: string; state: string }>).find((x) => x.node_key === node);
      ctx.out(`${op === 'confirm' ? 'Confirmed' : 'Skipped'} gate ${node} (${n?.state ?? '?'}) of movement ${r.movement.id}: it is ${r.movement.state}.`);
    },
  };
};

export const gateCommands: CliCommand[] = [gate('confirm'), gate('skip')];
