/**
 * A planted bug for the random runs (test/model/cex-run.ts), loaded first by a worker process
 * (`--import`): the CEX withdrawal executor's recover() no longer asks the exchange whether the
 * attempt went through; it answers READY, "nothing was withdrawn", so the node starts a new attempt
 * under a new client withdrawal id. The check must report it as S1 (two withdrawals for one node).
 */
import { CexWithdrawalActionExecutor } from '../../../src/executors/cex/withdrawal-action.ts';
import { ExecutionResultSchema } from '../../../src/executors/protocol.ts';

CexWithdrawalActionExecutor.prototype.recover = async function plantedRecover() {
  return ExecutionResultSchema.parse({ next_state: 'READY', error_code: 'PLANTED_RESUBMIT', error_detail: 'planted bug: recovery resubmits without asking the exchange' });
};
