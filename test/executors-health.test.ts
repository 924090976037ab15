import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { generatePrivateKey } from 'viem/accounts';
import { refreshRegistryHealth } from '../src/sweeps/executor-health.ts';
import { NotFoundError, ValidationError } from '../src/errors.ts';
import { LocalExecutorAdapter } from '../src/executors/local-adapter.ts';
import type { Signer } from '../src/executors/protocol.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { LocalPrivateKeySignerEvm } from '../src/executors/signers/local-private-key-evm.ts';
import { NoopSigner } from '../src/executors/signers/noop.ts';
import { createSimExecutors } from '../src/executors/sim/index.ts';
import {
  canonicalEvmAddress,
  identityPosture,
  listExecutors,
  listSigners,
  setExpectedSignerIdentity,
  type SignerRosterRow,
} from '../src/persistence/registry.ts';
import pino from 'pino';
import { testDatabase } from './helpers/db.ts';

const { pool } = await testDatabase();

const evm = new LocalPrivateKeySignerEvm({ signerKey: 'evm_dev', privateKey: generatePrivateKey() });
const other = new LocalPrivateKeySignerEvm({ signerKey: 'unused', privateKey: generatePrivateKey() });

function fakeSigner(signerKey: string, health?: () => Promise<Record<string, unknown> | null>): Signer {
  return { signerKey, sign: async () => ({ signature: '', signature_format: 'noop', signer_ref: signerKey }), ...(health ? { health } : {}) };
}

function registries(opts: { withoutExecutor?: string; withoutSigner?: string; brokenEvm?: boolean } = {}) {
  const executors = new ExecutorRegistry();
  createSimExecutors(pool, executors);
  const handlers = {
    'exec.no_health': {},
    'exec.throws': { health: async () => { throw new Error('wallet service unreachable'); } },
    'exec.hangs': { health: () => new Promise<Record<string, unknown>>(() => {}) },
    'exec.says_down': { health: async () => ({ ok: false, reason: 'maintenance', since: 10n }) },
  };
  for (const [executorKey, handler] of Object.entries(handlers)) {
    if (executorKey !== opts.withoutExecutor) executors.register(new LocalExecutorAdapter({ executorKey, lane: 'cex', handler }));
  }
  const signers = new SignerRegistry();
  const list: Signer[] = [
    opts.brokenEvm ? fakeSigner('evm_dev', async () => { throw new Error('kms timeout'); }) : evm,
    new NoopSigner('noop'),
    fakeSigner('zero_address', async () => ({ ok: true, signer_address: '0x' + '0'.repeat(40) })),
    fakeSigner('no_health'),
  ];
  for (const s of list) if (s.signerKey !== opts.withoutSigner) signers.register(s);
  return { executors, signers };
}

async function signerRow(key: string): Promise<SignerRosterRow> {
  const row = (await listSigners(pool)).find((r) => r.signer_key === key);
  assert.ok(row, `signer ${key} has a row`);
  return row;
}

describe('refreshRegistryHealth', () => {
  test('records up, down (throw, timeout, ok:false) and unknown, and the observed signer address', async () => {
    const { executors, signers } = registries();
    const report = await refreshRegistryHealth(pool, executors, signers, { timeoutMs: 200 });
    assert.deepEqual(report.orphaned, { executors: [], signers: [] });

    const rows = Object.fromEntries((await listExecutors(pool)).map((r) => [r.executor_key, r]));
    assert.deepEqual(
      Object.fromEntries(Object.entries(rows).map(([k, r]) => [k, [r.health_state, r.status, r.lane]])),
      {
        'exec.hangs': ['down', 'active', 'cex'],
        'exec.no_health': ['unknown', 'active', 'cex'],
        'exec.says_down': ['down', 'active', 'cex'],
        'exec.sim.action': ['up', 'active', 'sim'],
        'exec.sim.observe': ['up', 'active', 'sim'],
        'exec.throws': ['down', 'active', 'cex'],
      },
    );
    assert.equal(rows['exec.throws'].health_detail.error, 'wallet service unreachable');
    assert.equal(rows['exec.hangs'].health_detail.code, 'HEALTH_CHECK_TIMEOUT');
    assert.deepEqual(rows['exec.says_down'].health_detail, { ok: false, reason: 'maintenance', since: '10' });
    assert.deepEqual(rows['exec.sim.action'].health_detail, { ok: true, executor_key: 'exec.sim.action', lane: 'sim' });
    assert.ok(rows['exec.sim.action'].last_health_checked_at instanceof Date);

    const dev = await signerRow('evm_dev');
    assert.equal(dev.health_state, 'up');
    assert.equal(dev.observed_signer_address, evm.address);
    assert.equal(dev.expected_signer_address, null);
    assert.equal(dev.identity_posture, 'unenrolled');
    const noop = await signerRow('noop');
    assert.equal(noop.health_state, 'up');
    assert.equal(noop.observed_signer_address, null);
    const zero = await signerRow('zero_address');
    assert.equal(zero.health_state, 'up');
    assert.equal(zero.observed_signer_address, null);
    assert.match(String(zero.health_detail.identity_error), /nonzero/);
    assert.equal((await signerRow('no_health')).health_state, 'unknown');
  });

  test('expected identity: enrolment gives match / mismatch / unobserved; health never overwrites it', async () => {
    const { executors, signers } = registries();
    await refreshRegistryHealth(pool, executors, signers, { timeoutMs: 200 });

    const enrolled = await setExpectedSignerIdentity(pool, 'evm_dev', evm.address.toUpperCase().replace('0X', '0x'), 'admin@desk');
    assert.equal(enrolled.expected_signer_address, evm.address);
    assert.equal(enrolled.expected_set_by, 'admin@desk');
    assert.equal(enrolled.identity_posture, 'match');

    await setExpectedSignerIdentity(pool, 'evm_dev', other.address, 'admin@desk');
    assert.equal((await signerRow('evm_dev')).identity_posture, 'mismatch');
    await refreshRegistryHealth(pool, executors, signers, { timeoutMs: 200 });
    const after = await signerRow('evm_dev');
    assert.equal(after.expected_signer_address, other.address, 'the sweep left the expectation alone');
    assert.equal(after.identity_posture, 'mismatch');

    await setExpectedSignerIdentity(pool, 'noop', other.address, 'admin@desk');
    assert.equal((await signerRow('noop')).identity_posture, 'unobserved');

    await setExpectedSignerIdentity(pool, 'evm_dev', evm.address, 'admin@desk');
  });

  test('enrolment validates the address and the signer key', async () => {
    for (const bad of ['0x123', 'not an address', '0x' + '0'.repeat(40), '']) {
      await assert.rejects(setExpectedSignerIdentity(pool, 'evm_dev', bad, 'admin'), ValidationError, bad);
    }
    await assert.rejects(setExpectedSignerIdentity(pool, 'nobody', evm.address, 'admin'), NotFoundError);
  });

  test('a signer that goes down keeps its last observation', async () => {
    const broken = registries({ brokenEvm: true });
    await refreshRegistryHealth(pool, broken.executors, broken.signers, { timeoutMs: 200 });
    const down = await signerRow('evm_dev');
    assert.equal(down.health_state, 'down');
    assert.equal(down.observed_signer_address, evm.address);
    assert.equal(down.health_detail.error, 'kms timeout');
  });

  test('implementations no longer registered become orphans; orphaned signers lose their observation, not their enrolment', async () => {
    const { executors, signers } = registries({ withoutExecutor: 'exec.throws', withoutSigner: 'evm_dev' });
    const report = await refreshRegistryHealth(pool, executors, signers, { timeoutMs: 200 });
    assert.deepEqual(report.orphaned, { executors: ['exec.throws'], signers: ['evm_dev'] });
    assert.equal((await listExecutors(pool)).find((r) => r.executor_key === 'exec.throws')?.status, 'orphan');
    const orphan = await signerRow('evm_dev');
    assert.equal(orphan.status, 'orphan');
    assert.equal(orphan.observed_signer_address, null);
    assert.equal(orphan.expected_signer_address, evm.address);
    assert.equal(orphan.identity_posture, 'unobserved');

    // A second sweep reports nothing new; registering them again makes them active.
    assert.deepEqual((await refreshRegistryHealth(pool, executors, signers, { timeoutMs: 200 })).orphaned, { executors: [], signers: [] });
    const full = registries();
    await refreshRegistryHealth(pool, full.executors, full.signers, { timeoutMs: 200 });
    const back = await signerRow('evm_dev');
    assert.equal(back.status, 'active');
    assert.equal(back.identity_posture, 'match');
    assert.equal((await listExecutors(pool)).find((r) => r.executor_key === 'exec.throws')?.status, 'active');
  });
});

test('each executor or signer found down is a warn line naming it, and no URL (an RPC or exchange URL may hold a key) is stored or logged', async () => {
  const executors = new ExecutorRegistry();
  createSimExecutors(pool, executors);
  executors.register(
    new LocalExecutorAdapter({
      executorKey: 'exec.rpc_down',
      lane: 'evm',
      handler: { health: async () => { throw new Error('HTTP request failed. URL: https://rpc.example.invalid/v2/sk_live_abc123 Details: fetch failed'); } },
    }),
  );
  const signers = new SignerRegistry();
  signers.register(fakeSigner('kms_down', async () => { throw new Error('connect ECONNREFUSED'); }));
  signers.register(new NoopSigner('noop'));
  const lines: Record<string, any>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  await refreshRegistryHealth(pool, executors, signers, { timeoutMs: 200, log });
  const warned = lines.filter((l) => l.level === 40).map((l) => `${l.msg}:${l.executor_key ?? l.signer_key}`);
  assert.deepEqual(warned.sort(), ['executor down:exec.rpc_down', 'signer down:kms_down']);
  const stored = (await listExecutors(pool)).find((r) => r.executor_key === 'exec.rpc_down')!;
  assert.equal(stored.health_detail.error, 'HTTP request failed. URL: [url] Details: fetch failed');
  assert.ok(!JSON.stringify(lines).includes('sk_live_abc123'), 'the key in the URL is in no log line');
});

test('identity posture and address canonicalisation', () => {
  assert.equal(identityPosture(null, null), 'unenrolled');
  assert.equal(identityPosture(null, '0xabc'), 'unenrolled');
  assert.equal(identityPosture('0xabc', null), 'unobserved');
  assert.equal(identityPosture('0xabc', '0xabc'), 'match');
  assert.equal(identityPosture('0xabc', '0xdef'), 'mismatch');
  assert.equal(canonicalEvmAddress('0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266'), '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266');
  assert.equal(canonicalEvmAddress('0x' + '0'.repeat(40)), null);
  assert.equal(canonicalEvmAddress('f39fd6e51aad88f6f4ce6ab8827279cfffb92266'), null);
  assert.equal(canonicalEvmAddress(42), null);
});
