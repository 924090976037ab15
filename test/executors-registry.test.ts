import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  ExecutorNotRegisteredError,
  FatalMovementError,
  SignerNotRegisteredError,
} from '../src/executors/errors.ts';
import { LocalExecutorAdapter } from '../src/executors/local-adapter.ts';
import type { SignResult } from '../src/executors/protocol.ts';
import { bindingExtras, ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { NoopSigner } from '../src/executors/signers/noop.ts';
import { executionContext, preparedAction } from './helpers/protocol.ts';

const ctx = executionContext('exec.a', { action_type: 'sim' });

const prepared = preparedAction({ prepared_action_id: 'p1', action_type: 'sim' });

describe('ExecutorRegistry', () => {
  const a = new LocalExecutorAdapter({ executorKey: 'exec.a', handler: {} });
  const b = new LocalExecutorAdapter({ executorKey: 'exec.b', lane: 'cex', handler: {} });
  const registry = new ExecutorRegistry();
  registry.register(b);
  registry.register(a);

  test('looks up by key string and by object binding', () => {
    assert.equal(registry.get('exec.a'), a);
    assert.equal(registry.get({ executor_key: 'exec.b', exchange: 'upbit' }), b);
    assert.equal(registry.has('exec.a'), true);
    assert.equal(registry.has('exec.z'), false);
    assert.deepEqual(registry.keys(), ['exec.a', 'exec.b']);
    assert.deepEqual(registry.all(), [a, b]);
  });

  test('an unknown key throws EXECUTOR_NOT_REGISTERED naming the key', () => {
    assert.throws(
      () => registry.get({ executor_key: 'exec.missing' }),
      (err: unknown) => err instanceof ExecutorNotRegisteredError && err.code === 'EXECUTOR_NOT_REGISTERED' && err.executorKey === 'exec.missing' && err.message.includes('exec.missing'),
    );
  });

  test('a malformed binding throws the same typed error, never a TypeError', () => {
    for (const bad of [null, undefined, 42, '', {}, { executor_key: 7 }, ['exec.a']]) {
      assert.throws(
        () => registry.get(bad),
        (err: unknown) => err instanceof ExecutorNotRegisteredError && err.executorKey === null,
        JSON.stringify(bad),
      );
    }
  });

  test('registries are independent instances', () => {
    assert.equal(new ExecutorRegistry().has('exec.a'), false);
  });

  test('a second implementation under a taken key is refused; the same one again is harmless', () => {
    registry.register(a);
    assert.throws(() => registry.register(new LocalExecutorAdapter({ executorKey: 'exec.a', handler: {} })), /already registered/);
    assert.equal(registry.get('exec.a'), a);
  });
});

describe('SignerRegistry', () => {
  test('looks up by key and object; unknown or malformed throws SIGNER_NOT_REGISTERED', () => {
    const registry = new SignerRegistry();
    const noop = new NoopSigner('noop');
    registry.register(noop);
    assert.equal(registry.get('noop'), noop);
    assert.equal(registry.get({ signer_key: 'noop', region: 'x' }), noop);
    assert.throws(() => registry.get('kms'), (e: unknown) => e instanceof SignerNotRegisteredError && e.code === 'SIGNER_NOT_REGISTERED' && e.signerKey === 'kms');
    assert.throws(() => registry.get({ executor_key: 'noop' }), (e: unknown) => e instanceof SignerNotRegisteredError && e.signerKey === null);
  });
});

test('bindingExtras returns the fields besides the key', () => {
  assert.deepEqual(bindingExtras({ executor_key: 'exec.a', exchange: 'upbit', mode: 'live' }), { exchange: 'upbit', mode: 'live' });
  assert.deepEqual(bindingExtras({ signer_key: 's', region: 'eu' }), { region: 'eu' });
  assert.deepEqual(bindingExtras('exec.a'), {});
  assert.deepEqual(bindingExtras(null), {});
});

describe('LocalExecutorAdapter', () => {
  test('without preflight every precondition passes; without optional methods they are absent', async () => {
    const adapter = new LocalExecutorAdapter({ executorKey: 'exec.a', handler: {} });
    assert.equal(adapter.lane, 'local');
    assert.equal(await adapter.preflight(ctx), null);
    assert.equal(adapter.health, undefined);
    assert.equal(adapter.cancel, undefined);
    assert.equal(adapter.preSubmitCheck, undefined);
    await adapter.close();
  });

  test('without prepare, submit or observe the call fails with EXECUTOR_METHOD_NOT_IMPLEMENTED', async () => {
    const adapter = new LocalExecutorAdapter({ executorKey: 'exec.a', handler: {} });
    for (const call of [() => adapter.prepare(ctx), () => adapter.submit(ctx, prepared, {}), () => adapter.observe(ctx)]) {
      await assert.rejects(call, (e: unknown) => e instanceof FatalMovementError && e.code === 'EXECUTOR_METHOD_NOT_IMPLEMENTED');
    }
  });

  test('without recover an uncertain attempt stays UNKNOWN and asks for an operator', async () => {
    const adapter = new LocalExecutorAdapter({ executorKey: 'exec.a', handler: {} });
    const r = await adapter.recover(ctx);
    assert.equal(r.next_state, 'UNKNOWN');
    assert.equal(r.error_code, 'RECOVER_NOT_IMPLEMENTED');
    assert.equal(r.manual_intervention_required, true);
  });

  test('delegates to the handler and fills result defaults', async () => {
    const seen: Array<{ method: string; signResult?: SignResult }> = [];
    const adapter = new LocalExecutorAdapter({
      executorKey: 'exec.a',
      lane: 'cex',
      handler: {
        preflight: () => undefined,
        prepare: async () => ({ next_state: 'SUBMITTING', prepared_action: prepared }),
        submit: async (_c, p, opts) => {
          seen.push({ method: 'submit', signResult: opts.signResult });
          return { next_state: 'SUBMITTED', provider_refs: { id: p.prepared_action_id } };
        },
        observe: () => ({ next_state: 'OBSERVING', retry_after_seconds: 5 }),
        recover: async () => ({ next_state: 'COMPLETED' }),
        cancel: async () => ({ next_state: 'CANCELLED' }),
        health: async () => ({ ok: true }),
        preSubmitCheck: async () => {
          seen.push({ method: 'preSubmitCheck' });
        },
      },
    });
    assert.equal(adapter.lane, 'cex');
    assert.equal(await adapter.preflight(ctx), null);
    assert.deepEqual((await adapter.prepare(ctx)).prepared_action, prepared);
    const signResult = { signature: '', signature_format: 'noop', signer_ref: 'noop:x' };
    const submitted = await adapter.submit(ctx, prepared, { signResult });
    assert.deepEqual(submitted.provider_refs, { id: 'p1' });
    assert.deepEqual(submitted.proof, {});
    assert.equal(submitted.manual_intervention_required, false);
    assert.equal(submitted.provider_state, null);
    assert.equal((await adapter.observe(ctx)).retry_after_seconds, 5);
    assert.equal((await adapter.recover(ctx)).next_state, 'COMPLETED');
    assert.equal((await adapter.cancel!(ctx)).next_state, 'CANCELLED');
    assert.deepEqual(await adapter.health!(), { ok: true });
    await adapter.preSubmitCheck!(ctx);
    assert.deepEqual(seen, [{ method: 'submit', signResult }, { method: 'preSubmitCheck' }]);
  });

  test('a handler returning a malformed result fails with EXECUTOR_INVALID_RESULT', async () => {
    const adapter = new LocalExecutorAdapter({
      executorKey: 'exec.a',
      handler: { observe: async () => ({ next_state: 'FINISHED' }) as never, preflight: async () => ({ next_state: 'FAILED', error_code: 42 }) as never },
    });
    await assert.rejects(adapter.observe(ctx), (e: unknown) => e instanceof FatalMovementError && e.code === 'EXECUTOR_INVALID_RESULT');
    await assert.rejects(adapter.preflight(ctx), (e: unknown) => e instanceof FatalMovementError && e.message.includes('error_code'));
  });

  test("a handler's own errors pass through unchanged", async () => {
    const boom = new Error('exchange down');
    const adapter = new LocalExecutorAdapter({ executorKey: 'exec.a', handler: { prepare: async () => { throw boom; } } });
    await assert.rejects(adapter.prepare(ctx), (e: unknown) => e === boom);
  });
});
