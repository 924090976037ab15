import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.ts';

test('defaults follow the reference runtime', () => {
  const c = loadConfig({});
  assert.equal(c.port, 3000);
  assert.equal(c.dispatchIntervalSeconds, 2);
  assert.equal(c.observeIntervalSeconds, 5);
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
});
