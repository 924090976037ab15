import assert from 'node:assert/strict';
import { finalizeProposal } from '../../src/services/template-proposals.ts';
import type { Pool } from '../../src/persistence/db.ts';
import { getProposal } from '../../src/persistence/template-proposals.ts';
import { callApi, type InProcessApp } from './http.ts';

/**
 * Makes a template live the way a person does: POST /v3/templates (a proposal), approval by a
 * second token, then the finalization the sweep would do once the challenge window has passed
 * (run here on a clock standing at the window's end, so nothing sleeps). A graph that is already a
 * version comes back unchanged. Returns the live version's number.
 */
export async function makeTemplateLive(
  target: InProcessApp | string,
  pool: Pool,
  def: unknown,
  tokens: { proposer: string; approver: string },
  config: { templateReviewWindowSeconds: number; templateChallengeWindowSeconds: number } = {
    templateReviewWindowSeconds: 3600,
    templateChallengeWindowSeconds: 3600,
  },
): Promise<number> {
  const posted = await callApi(target, 'POST', '/v3/templates', tokens.proposer, def);
  if (posted.status === 200) return posted.body.version.version;
  assert.equal(posted.status, 202, posted.text);
  const id = posted.body.proposal.id;
  const approved = await callApi(target, 'POST', `/v3/template-proposals/${id}/approve`, tokens.approver, {});
  assert.equal(approved.status, 200, approved.text);
  const row = (await getProposal(pool, id))!;
  const at = new Date(row.challenge_ends_at!);
  const { version } = await finalizeProposal({ pool, config, now: () => at }, id);
  return version;
}
