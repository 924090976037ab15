import type { TemplateDefinitionInput } from '../../src/plan/template-schema.ts';
import { benchTemplate } from './load.ts';

/**
 * Movements that cannot complete, for checking that the benchmark reports them instead of waiting:
 * 'fail': the first step's provider refuses the submit (error code BENCH_INJECTED_FAILURE);
 * 'stuck': the observation stays pending and asks to be polled again only in ten minutes.
 */
export type BenchFault = 'fail' | 'stuck';

export const INJECTED_ERROR_CODE = 'BENCH_INJECTED_FAILURE';

export function faultyBenchTemplate(fault: BenchFault): TemplateDefinitionInput {
  const base = benchTemplate(`bench-3node-${fault}`) as TemplateDefinitionInput & { nodes: Array<Record<string, unknown>> };
  const sim =
    fault === 'fail'
      ? { withdraw: { submit: [{ next_state: 'FAILED', error_code: INJECTED_ERROR_CODE, error_detail: 'the benchmark asked this movement to fail' }] } }
      : { observe: { observe: [{ next_state: 'OBSERVING', retry_after_seconds: 600 }] } };
  return {
    ...base,
    nodes: base.nodes.map((n) => {
      const script = (sim as Record<string, unknown>)[n.node_key as string];
      return script ? { ...n, config: { sim: script } } : n;
    }),
  } as TemplateDefinitionInput;
}
