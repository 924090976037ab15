import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ConfigError, earlyLogLevel, loadConfig } from '../src/config.ts';

test('defaults follow the reference runtime', () => {
  const c = loadConfig({});
  assert.equal(c.port, 3000);
  assert.equal(c.dispatchIntervalSeconds, 2);
  assert.equal(c.recoveryIntervalSeconds, 60);
  assert.equal(c.callbackMaxAttempts, 5);
  assert.equal(c.approvalTtlSeconds, 300);
  assert.equal(c.expirationBatchSize, 20);
  assert.equal(c.observeTimeoutEnforcement, false);
  assert.equal(c.dataDir, './.ferry/data');
});

test('a bad value stops start with a message naming the variable', () => {
  assert.throws(() => loadConfig({ PORT: 'eighty' }), (e: unknown) => e instanceof ConfigError && e.variable === 'PORT' && /PORT/.test(e.message));
  assert.throws(() => loadConfig({ FERRY_APPROVAL_QUORUM: '0' }), /FERRY_APPROVAL_QUORUM/);
  assert.throws(() => loadConfig({ FERRY_WORKERS_ENABLED: 'maybe' }), /FERRY_WORKERS_ENABLED/);
  assert.throws(() => loadConfig({ DATABASE_URL: 'not a url' }), /DATABASE_URL/);
});

test('flags and lists parse', () => {
  const c = loadConfig({ FERRY_OBSERVE_TIMEOUT_ENFORCEMENT_ENABLED: 'true', FERRY_CALLBACK_ALLOWED_HOSTS: 'a.example, B.example' });
  assert.equal(c.observeTimeoutEnforcement, true);
  assert.deepEqual(c.callbackAllowedHosts, ['a.example', 'b.example']);
});

test('a malformed secret is refused without being echoed', () => {
  const key = '0x' + 'ab'.repeat(31);
  assert.throws(
    () => loadConfig({ FERRY_EVM_SIGNER_KEY: key }),
    (e: unknown) => e instanceof ConfigError && e.variable === 'FERRY_EVM_SIGNER_KEY' && !e.message.includes('abab'),
  );
  assert.throws(
    () => loadConfig({ FERRY_CALLBACK_SECRET: 'short-secret' }),
    (e: unknown) => e instanceof ConfigError && !e.message.includes('short-secret'),
  );
  // A whsec_ secret must be what Standard Webhooks libraries decode: base64 of 24 to 64 bytes.
  assert.throws(
    () => loadConfig({ FERRY_CALLBACK_SECRET: 'whsec_not*base64*at*all*here' }),
    (e: unknown) => e instanceof ConfigError && e.variable === 'FERRY_CALLBACK_SECRET' && !e.message.includes('not*base64'),
  );
  assert.equal(loadConfig({ FERRY_CALLBACK_SECRET: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' }).callbackSecret, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
});

test('the configuration file adds chains, signers and tokens', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-config-'));
  const path = join(dir, 'ferry.yaml');
  writeFileSync(
    path,
    [
      'evm:',
      '  chains:',
      '    - { chain_id: 31337, name: local, rpc_url: "http://127.0.0.1:8545", confirmations: 2, max_fee_per_gas_cap_wei: "100000000000" }',
      '    - { chain_id: 31338, rpc_url: "http://127.0.0.1:8546", finality: finalized, max_fee_per_gas_cap_wei: "100000000000" }',
      '  signers:',
      '    - { key: hot_1, kind: local_key, private_key_env: HOT_1_KEY, chains: [31337, 31338] }',
      '  tokens:',
      '    - { chain_id: 31337, symbol: USDC, address: "0x5FbDB2315678afecb367f032d93F642f64180aa3", decimals: 6 }',
    ].join('\n'),
  );
  const c = loadConfig({ FERRY_CONFIG_FILE: path });
  assert.equal(c.file.evm.chains.length, 2);
  assert.equal(c.file.evm.chains[0]!.confirmations, 2);
  assert.equal(c.file.evm.chains[1]!.confirmations, 1);
  assert.equal(c.file.evm.chains[1]!.finality, 'finalized');
  assert.deepEqual(c.file.evm.signers[0]!.chains, [31337, 31338]);
  assert.equal(c.file.evm.tokens[0]!.decimals, 6);
  assert.deepEqual(loadConfig({}).file.evm, { chains: [], signers: [], tokens: [], watch: [], fee_caps: [] });
  assert.deepEqual(loadConfig({}).file.sim, { balances: [] });
});

test('a bad entry in the configuration file names the entry, never the value', () => {
  const secretUrl = 'https://rpc.example/v2/SECRET-API-KEY';
  const cases: Array<[string, RegExp]> = [
    [`evm:\n  chains:\n    - { chain_id: 1, rpc_url: "${secretUrl}" }\n    - { chain_id: 1, rpc_url: "${secretUrl}" }`, /evm\.chains\[1\]\.chain_id: chain 1 is listed twice/],
    [`evm:\n  chains:\n    - { chain_id: 1, rpc_url: "${secretUrl}" }\n  signers:\n    - { key: s, kind: local_key, private_key_env: K, chains: [2] }`, /evm\.signers\[0\]\.chains\[0\]: chain 2 is not in evm\.chains/],
    [`evm:\n  signers:\n    - { key: s, kind: aws_kms, chains: [] }`, /evm\.signers\[0\]\.chains/],
    [`evm:\n  chains:\n    - { chain_id: 1, rpc_url: "${secretUrl}", colour: blue }`, /evm\.chains\[0\]/],
    [`evm: [1, 2`, /not valid YAML/],
    [`evm:\n  chains:\n    - { chain_id: 1, rpc_url: "${secretUrl}" }\n  watch:\n    - { chain_id: 5, address: "0x000000000000000000000000000000000000dEaD" }`, /evm\.watch\[0\]\.chain_id: chain 5 is not in evm\.chains/],
  ];
  const dir = mkdtempSync(join(tmpdir(), 'ferry-config-'));
  for (const [i, [text, expected]] of cases.entries()) {
    const path = join(dir, `bad-${i}.yaml`);
    writeFileSync(path, text);
    assert.throws(
      () => loadConfig({ FERRY_CONFIG_FILE: path }),
      (e: unknown) => e instanceof ConfigError && e.variable === 'FERRY_CONFIG_FILE' && expected.test(e.message) && !e.message.includes('SECRET-API-KEY'),
      `case ${i}: ${text}`,
    );
  }
  assert.throws(() => loadConfig({ FERRY_CONFIG_FILE: join(dir, 'missing.yaml') }), /FERRY_CONFIG_FILE cannot be read \(ENOENT\)/);
});

test('callback networks are CIDR lists; a bad one names the variable', () => {
  assert.deepEqual(loadConfig({ FERRY_CALLBACK_ALLOWED_NETWORKS: '10.20.0.0/16, fd00::/8,127.0.0.1' }).callbackAllowedNetworks, ['10.20.0.0/16', 'fd00::/8', '127.0.0.1']);
  assert.deepEqual(loadConfig({}).callbackAllowedNetworks, []);
  for (const bad of ['10.0.0.0/33', 'example.com', '10.0.0/8', '::/129']) {
    assert.throws(() => loadConfig({ FERRY_CALLBACK_ALLOWED_NETWORKS: bad }), /FERRY_CALLBACK_ALLOWED_NETWORKS/, bad);
  }
});

test('the log level: a bad one is refused naming the variable; the logger starts on a valid one or the default', () => {
  assert.throws(() => loadConfig({ FERRY_LOG_LEVEL: 'loud' }), (e: unknown) => e instanceof ConfigError && e.variable === 'FERRY_LOG_LEVEL');
  assert.equal(loadConfig({ FERRY_LOG_LEVEL: 'warn' }).logLevel, 'warn');
  assert.equal(earlyLogLevel({ FERRY_LOG_LEVEL: 'warn' }), 'warn');
  assert.equal(earlyLogLevel({ FERRY_LOG_LEVEL: 'loud' }), 'info');
  assert.equal(earlyLogLevel({}), 'info');
});

test('FERRY_EMBEDDED_PG_PORT unset leaves the choice to start-up; set, it must be a port', () => {
  assert.equal(loadConfig({}).embeddedPgPort, undefined);
  assert.equal(loadConfig({ FERRY_EMBEDDED_PG_PORT: '55000' }).embeddedPgPort, 55000);
  assert.throws(() => loadConfig({ FERRY_EMBEDDED_PG_PORT: '70000' }), /FERRY_EMBEDDED_PG_PORT/);
});

test('FERRY_EMBEDDED_PG_SHARED_DIR: /var/lib/ferry unless set (empty counts as unset)', () => {
  assert.equal(loadConfig({}).embeddedPgSharedDir, '/var/lib/ferry');
  assert.equal(loadConfig({ FERRY_EMBEDDED_PG_SHARED_DIR: '' }).embeddedPgSharedDir, '/var/lib/ferry');
  assert.equal(loadConfig({ FERRY_EMBEDDED_PG_SHARED_DIR: '/srv/ferry' }).embeddedPgSharedDir, '/srv/ferry');
});
