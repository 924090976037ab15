import { evmChainKey } from '../../src/balances/watch.ts';

/**
 * The sandbox's treasury policy (docs/policy.md), installed through the API the way an operator
 * would, each change by one principal and approved by another: an address book entry `cold` (a cold
 * address on the local chain), a rule set (sweeps of usdc.transfer to `cold` are allowed, and so,
 * for the sandbox's other commands, is everything else), and one standing order, `hot-sweep`:
 * every hour, the hot wallet's USDC above 900000 goes to `cold`, at most 200000 a run and 1000000 a
 * day. Ferry runs with FERRY_POLICY_COOLDOWN_SECONDS=0 here, so each approved change is live at once.
 */

/** anvil's development account 6: the sandbox's cold address (nothing signs for it). */
export const COLD_ADDRESS = '0x976ea74026e726554db657fa54763abd0c3a0aa9';
export const STANDING_ORDER = 'hot-sweep';

async function call(url: string, token: string, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = (await res.json().catch(() => ({}))) as Record<string, unknown>;
  if (!res.ok) throw new Error(`sandbox policy: ${method} ${path} answered ${res.status}: ${JSON.stringify(answer)}`);
  return answer;
}

export async function installSandboxPolicy(
  url: string,
  tokens: Record<'approver' | 'admin', string>,
  facts: { chainId: number; hotWallet: string; usdc: string },
): Promise<{ standing_order_id: string; cold: string; lines: string[] }> {
  // Proposed by the admin, approved by the approver, live at once (no cool-down in the sandbox);
  // reading the policy finalizes what is due.
  const reviewed = async (path: string, body: unknown) => {
    const proposal = await call(url, tokens.admin, 'POST', path, body);
    await call(url, tokens.approver, 'POST', `/v3/policy/proposals/${String(proposal.id)}/approve`, {});
    await call(url, tokens.admin, 'GET', '/v3/policy/rules');
  };
  await reviewed('/v3/policy/address-book', { name: 'cold', network: 'local', address: COLD_ADDRESS, owner: 'treasury', kind: 'internal', notes: 'the sandbox cold address' });
  await reviewed('/v3/policy/rules', {
    rules: [
      { id: 'sweeps-to-cold', description: 'the hourly sweep of the hot wallet', match: { templates: ['usdc.transfer'], destination: { entries: ['cold'] } }, action: { type: 'allow' } },
      { id: 'sandbox', description: "the sandbox's other commands", action: { type: 'allow' } },
    ],
    limits: [{ id: 'usdc-daily-to-cold', asset: 'USDC', window_seconds: 86400, max_amount: '1000000', destination: { entries: ['cold'] } }],
  });
  const order = await call(url, tokens.admin, 'POST', '/v3/standing-orders', {
    name: STANDING_ORDER,
    template_key: 'usdc.transfer',
    asset: 'USDC',
    destinations: ['cold'],
    max_per_run: '200000',
    max_per_window: '1000000',
    window_seconds: 86400,
    trigger: {
      kind: 'ceiling',
      balance: { chain: evmChainKey(facts.chainId), wallet: facts.hotWallet.toLowerCase(), asset: facts.usdc.toLowerCase() },
      ceiling: '900000',
      schedule: { cron: '0 * * * *' },
    },
    expires_at: new Date(Date.now() + 365 * 86400_000).toISOString(),
  });
  await call(url, tokens.approver, 'POST', `/v3/standing-orders/${String(order.id)}/approve`, {});
  return {
    standing_order_id: String(order.id),
    cold: COLD_ADDRESS,
    lines: [
      `A standing order, ${STANDING_ORDER}, sweeps the hot wallet's USDC above 900000 to the book entry cold (${COLD_ADDRESS}) at the top of every hour`,
      `(at most 200000 a run): watch its runs in ${url}/ui#/standing-orders/${String(order.id)}. The address book and the rule set are under GET /v3/policy.`,
      '',
    ],
  };
}
