import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { configuredRegistries } from '../src/actors/runtime.ts';
import { parseConfigFile } from '../src/config-file.ts';
import { ConfigError, loadConfig } from '../src/config.ts';
import type { CexAccountConfig } from '../src/config-file.ts';
import { CEX_DEPOSIT_OBSERVE_KEY, CEX_WITHDRAWAL_ACTION_KEY, CEX_WITHDRAWAL_OBSERVE_KEY, CexWithdrawalActionExecutor, createCexAccount, createCexLane, type CexAccount } from '../src/executors/cex/index.ts';
import { log } from '../src/log.ts';
import { createPool } from '../src/persistence/db.ts';

/** cex.accounts in the config file: validation, secrets from the environment, registration. */

const ACCOUNT = `cex:
  accounts:
    - key: binance_main
      exchange: binance
      base_url: http://127.0.0.1:9
      api_key_env: BINANCE_MAIN_KEY
      api_secret_env: BINANCE_MAIN_SECRET
      networks: { ethereum: ETH }
`;
const SECRET = 'very-secret-value-that-must-not-leak-0123456789';

test('a cex account parses with its defaults; bad entries are named, never echoed', () => {
  const ok = parseConfigFile(ACCOUNT);
  assert.ok(ok.ok);
  assert.deepEqual(ok.file.cex.accounts[0], {
    key: 'binance_main',
    exchange: 'binance',
    base_url: 'http://127.0.0.1:9',
    api_key_env: 'BINANCE_MAIN_KEY',
    api_secret_env: 'BINANCE_MAIN_SECRET',
    networks: { ethereum: 'ETH' },
    timeout_ms: 10_000,
  });
  const empty = parseConfigFile('evm: {}');
  assert.ok(empty.ok);
  assert.deepEqual(empty.file.cex, { accounts: [] });

  const kraken = parseConfigFile(ACCOUNT.replace('exchange: binance', 'exchange: kraken'));
  assert.ok(!kraken.ok);
  assert.match(kraken.reason, /^cex\.accounts\[0\]\.exchange: /);
  const twice = parseConfigFile(ACCOUNT + ACCOUNT.split('\n').slice(2).join('\n'));
  assert.ok(!twice.ok);
  assert.match(twice.reason, /^cex\.accounts\[1\]\.key: account binance_main is listed twice/);
  const inline = parseConfigFile(ACCOUNT.replace('api_secret_env: BINANCE_MAIN_SECRET', `api_secret_env: ${SECRET}`));
  assert.ok(!inline.ok);
  assert.match(inline.reason, /^cex\.accounts\[0\]\.api_secret_env: an environment variable name$/);
  assert.ok(!inline.reason.includes(SECRET));
  // A network is an exchange id (ETH) or a ccxt code (ERC20); anything else stops start naming the entry.
  const spaced = parseConfigFile(ACCOUNT.replace('networks: { ethereum: ETH }', 'networks: { ethereum: "ERC 20" }'));
  assert.ok(!spaced.ok);
  assert.match(spaced.reason, /^cex\.accounts\[0\]\.networks\.ethereum: an exchange network id \(e\.g\. BSC\) or a ccxt network code/);
  const both = parseConfigFile(ACCOUNT.replace('networks: { ethereum: ETH }', 'networks: { ethereum: ERC20, bsc: BSC, bep20: BEP20 }'));
  assert.ok(both.ok);
  assert.deepEqual(both.file.cex.accounts[0]!.networks, { ethereum: 'ERC20', bsc: 'BSC', bep20: 'BEP20' });
});

test('an unset key or secret variable stops start naming the variable; the lane registers its three executors', async () => {
  const file = parseConfigFile(ACCOUNT);
  assert.ok(file.ok);
  assert.throws(
    () => createCexLane(file.file.cex.accounts, undefined, { env: { BINANCE_MAIN_KEY: SECRET } }),
    (err: unknown) => err instanceof ConfigError && err.variable === 'BINANCE_MAIN_SECRET' && !err.message.includes(SECRET),
  );

  const dir = mkdtempSync(join(tmpdir(), 'ferry-cex-config-'));
  writeFileSync(join(dir, 'ferry.yaml'), ACCOUNT);
  process.env.BINANCE_MAIN_KEY = SECRET;
  process.env.BINANCE_MAIN_SECRET = `${SECRET}-2`;
  const pool = createPool('postgres://postgres@127.0.0.1:1/none', 1, 'unused');
  try {
    const config = loadConfig({ FERRY_CONFIG_FILE: join(dir, 'ferry.yaml'), FERRY_DATA_DIR: dir });
    const { executors } = await configuredRegistries(pool, config, { log });
    for (const key of [CEX_WITHDRAWAL_ACTION_KEY, CEX_WITHDRAWAL_OBSERVE_KEY, CEX_DEPOSIT_OBSERVE_KEY]) {
      assert.ok(executors.has(key), key);
      // Nothing listens on port 9: the account is unreachable, and the answer says so without secrets or URLs.
      const health = await executors.get(key).health!();
      assert.equal(health!.ok, false);
      assert.deepEqual((health!.accounts as Array<Record<string, unknown>>).map((a) => [a.account, a.reachable, a.error]), [['binance_main', false, 'CEX_UNAVAILABLE']]);
      const text = JSON.stringify(health);
      assert.ok(!text.includes(SECRET) && !text.includes('127.0.0.1'), text);
    }
    // Without accounts, nothing of the lane is registered (and ccxt is never loaded).
    assert.ok(!(await configuredRegistries(pool, loadConfig({ FERRY_DATA_DIR: dir }), { log })).executors.has(CEX_WITHDRAWAL_ACTION_KEY));
  } finally {
    delete process.env.BINANCE_MAIN_KEY;
    delete process.env.BINANCE_MAIN_SECRET;
    await pool.end();
  }
});

test("not_found_after_seconds: an account's grace before an unknown attempt absent from the history counts as never made", async () => {
  const set = parseConfigFile(ACCOUNT + '      not_found_after_seconds: 8\n');
  assert.ok(set.ok, set.ok ? '' : set.reason);
  assert.equal(set.file.cex.accounts[0]!.not_found_after_seconds, 8);
  const zero = parseConfigFile(ACCOUNT + '      not_found_after_seconds: 0\n');
  assert.ok(!zero.ok);
  assert.match(zero.reason, /^cex\.accounts\[0\]\.not_found_after_seconds: /);

  // recover() of an attempt prepared 10 s ago that the exchange does not list: READY (a new
  // attempt) past an 8 s grace, UNKNOWN (look again) under the default 300 s.
  const attempt = (account: CexAccount) => {
    const payload = JSON.stringify({ account: 'binance_main', coin: 'ETH', network: 'ETH', address: '0x' + '11'.repeat(20), address_tag: null, amount: '0.1', withdraw_order_id: 'n:1', prepared_at_ms: Date.now() - 10_000 });
    const prepared = { prepared_action_id: 'p', action_type: 'cex_withdrawal', payload_format: 'cex_withdrawal_json', payload, payload_hash: 'h', signing_required: false, provider_hints: {}, expires_at: null };
    const ctx = { attempt_artifacts: [{ artifact_type: 'prepared_action', content_inline: JSON.stringify(prepared) }] };
    return new CexWithdrawalActionExecutor(new Map([['binance_main', account]])).recover(ctx as never);
  };
  const env = { BINANCE_MAIN_KEY: SECRET, BINANCE_MAIN_SECRET: `${SECRET}-2` };
  const withGrace = createCexAccount(set.file.cex.accounts[0]!, env);
  const plain = parseConfigFile(ACCOUNT) as { ok: true; file: { cex: { accounts: CexAccountConfig[] } } };
  const byDefault = createCexAccount(plain.file.cex.accounts[0]!, env);
  for (const a of [withGrace, byDefault]) a.client = async () => ({ fetchWithdrawals: async () => [] }) as never;
  assert.equal(withGrace.notFoundAfterMs, 8000);
  const past = await attempt(withGrace);
  assert.equal(past.next_state, 'READY');
  assert.match(past.error_detail!, /after 8 s: nothing was withdrawn/);
  const under = await attempt(byDefault);
  assert.equal(under.next_state, 'UNKNOWN');
  assert.equal(under.error_code, 'CEX_WITHDRAWAL_NOT_FOUND');
});
