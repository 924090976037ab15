/**
 * `ferry templates apply FILE`: sends plan template definitions to a running Ferry (POST
 * /v3/templates). FILE is YAML or JSON holding one definition or a list of them. A definition whose
 * graph is unchanged creates no version, so applying the same file twice is harmless.
 */
import { readFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import { CliError, type CliCommand } from './command.ts';
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
    const target = apiTarget(ctx);
    const results = [];
    for (const def of defs) {
      const saved = await callApi(target, 'POST', '/v3/templates', def);
      results.push(saved);
      if (ctx.flag('json')) continue;
      const key = saved.template?.template_key ?? (def as { template_key?: string }).template_key;
      const version = saved.version?.version;
      ctx.out(saved.created ? `template ${key}: version ${version} created` : `template ${key}: unchanged (version ${version})`);
      const notApplied: string[] = saved.timeout_policy_not_applied ?? [];
      if (notApplied.length > 0) {
        ctx.out(`  note: timeout_policy changes of ${notApplied.join(', ')} are not applied to an unchanged graph`);
      }
    }
    if (ctx.flag('json')) ctx.out(JSON.stringify(results));
  },
};

export const templateCommands: CliCommand[] = [apply];
