import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createPublicClient, http, parseEther, parseTransaction, recoverTransactionAddress, serializeTransaction, type Address, type Hex, type PublicClient } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { WorkerDeps } from '../src/actors/execution.ts';
import { ConfigError } from '../src/config.ts';
import { ConfigFileSchema } from '../src/config-file.ts';
import { FatalMovementError, TemporaryMovementError } from '../src/executors/errors.ts';
import { EVM_NATIVE_TRANSFER_KEY, EvmNativeTransferExecutor } from '../src/executors/evm/index.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { ExpectedEffect, SignRequest } from '../src/executors/protocol.ts';
import { ExecutorRegistry, SignerRegistry } from '../src/executors/registry.ts';
import { AwsKmsEvmSigner, parseDerSignature } from '../src/executors/signers/aws-kms-evm.ts';
import { createSignerFromConfig } from '../src/executors/signers/from-config.ts';
import { LocalPrivateKeySignerEvm } from '../src/executors/signers/local-private-key-evm.ts';
import { artifactsOfNodes } from '../src/persistence/artifacts.ts';
import { ANVIL_CHAIN_ID, startAnvil, type Anvil } from './helpers/anvil.ts';
import { scratchDatabase } from './helpers/db.ts';
import { nativeTransferPlan } from './helpers/evm.ts';
import { approvedMovement, drain, runtimeDeps, snapshot } from './helpers/runtime.ts';
import { derSignature, startKmsEmulator, type KmsEmulator } from './emulators/kms.ts';

/**
 * AwsKmsEvmSigner with the real @aws-sdk/client-kms against the loopback KMS emulator (only the
 * endpoint is local): the address from GetPublicKey, a signed transaction that anvil accepts and
 * mines through the real dispatcher, low-s normalisation, and a throttled, failing or misconfigured
 * KMS behaving as documented (temporary vs. typed fatal errors, no secret in any message).
 */

// Never let the SDK near an instance metadata service.
process.env.AWS_EC2_METADATA_DISABLED = 'true';

let anvil: Anvil;
let chain: PublicClient;
let kms: KmsEmulator;

before(async () => {
  [anvil, kms] = await Promise.all([startAnvil(), startKmsEmulator()]);
  chain = createPublicClient({ transport: http(anvil.url, { retryCount: 0 }) });
});
after(async () => {
  await Promise.all([anvil?.stop(), kms?.stop()]);
});

function kmsSigner(overrides: Partial<ConstructorParameters<typeof AwsKmsEvmSigner>[0]> = {}) {
  return new AwsKmsEvmSigner({
    signerKey: 'kms_hot',
    keyId: kms.keyId,
    region: kms.region,
    endpoint: kms.url,
    credentials: { accessKeyId: kms.accessKeyId, secretAccessKey: kms.secretAccessKey },
    timeoutMs: 2_000,
    ...overrides,
  });
}

const RECIPIENT = '0x1111111111111111111111111111111111111111';
const tx = (nonce = 0) =>
  serializeTransaction({ type: 'eip1559', chainId: ANVIL_CHAIN_ID, nonce, to: RECIPIENT, value: 1000n, gas: 21_000n, maxFeePerGas: 10n ** 10n, maxPriorityFeePerGas: 1n });
const effect: ExpectedEffect = { chain_id: ANVIL_CHAIN_ID, asset: 'native', to: RECIPIENT, amount_base_units: '1000', max_fee_per_gas_cap_wei: '500000000000' };

function request(payload: string, extra: Partial<SignRequest> = {}): SignRequest {
  return {
    protocol_version: '1.0',
    request_id: 'r',
    request_node_id: 'n',
    signing_intent: { action: 'a', asset: 'ETH', amount: '1000', destination: RECIPIENT, max_fee_usd: null, chain_family: 'evm', allowed_payload_hash: payloadHash(payload) },
    payload_format: 'evm_raw_tx',
    payload,
    payload_hash: payloadHash(payload),
    metadata: {},
    executor_key: EVM_NATIVE_TRANSFER_KEY,
    expected_effect: effect,
    ...extra,
  };
}

const signsOf = (from: number) => kms.requests.slice(from).filter((r) => r.target === 'TrentService.Sign').length;
const isCode = (cls: typeof FatalMovementError | typeof TemporaryMovementError, code: string) => (err: unknown) => {
  assert.ok(err instanceof cls, `expected ${cls.name}, got ${String(err)}`);
  assert.equal((err as FatalMovementError).code, code);
  assert.ok(!(err as Error).message.includes(kms.secretAccessKey), 'no secret in the message');
  return true;
};

describe('AwsKmsEvmSigner', () => {
  test('its address is the keccak address of the KMS public key; health asks KMS', async () => {
    const signer = kmsSigner();
    assert.equal(await signer.getAddress(), kms.address);
    const seen = kms.requests.length;
    assert.deepEqual(await signer.health(), { ok: true, signer_key: 'kms_hot', signer_address: kms.address, mode: 'aws_kms', region: kms.region });
    assert.equal(kms.requests[seen]?.target, 'TrentService.GetPublicKey');
    await signer.close();
  });

  test('signs with MessageType DIGEST over the keccak digest; the signature recovers to the KMS address', async () => {
    const signer = kmsSigner();
    const result = await signer.sign(request(tx()));
    assert.equal(result.signature_format, 'evm_signed_tx');
    assert.equal(result.signer_ref, `aws_kms:${kms.address}`);
    assert.equal((await recoverTransactionAddress({ serializedTransaction: result.signature as never })).toLowerCase(), kms.address);
    await signer.close();
  });

  test('a high-s signature from KMS is normalised to low s, with the recovery id found by trial', async () => {
    const signer = kmsSigner();
    const payload = tx(5);
    const normal = await signer.sign(request(payload));
    kms.script('high_s');
    const flipped = await signer.sign(request(payload));
    // Deterministic ECDSA (RFC 6979): the same digest gives the same r; s comes back to the low half.
    assert.equal(flipped.signature, normal.signature);
    const s = BigInt(parseTransaction(flipped.signature as Hex).s!);
    assert.ok(s <= 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n, 'low s');
    await signer.close();
  });

  test('the policy runs before KMS: a refused request makes no KMS call at all', async () => {
    const signer = kmsSigner({ executors: [EVM_NATIVE_TRANSFER_KEY] });
    const seen = kms.requests.length;
    await assert.rejects(signer.sign(request(tx(), { expected_effect: null })), isCode(FatalMovementError, 'SIGNER_POLICY_VIOLATION'));
    await assert.rejects(signer.sign(request(tx(), { expected_effect: { ...effect, to: '0x3333333333333333333333333333333333333333' } })), isCode(FatalMovementError, 'SIGNER_POLICY_VIOLATION'));
    await assert.rejects(signer.sign(request(tx(), { executor_key: 'exec.other' })), isCode(FatalMovementError, 'SIGNER_POLICY_VIOLATION'));
    assert.equal(kms.requests.length, seen);
    await signer.close();
  });

  test('throttling: the SDK retries three times, then a temporary SIGNER_KMS_THROTTLED with a retry hint', async () => {
    const signer = kmsSigner();
    await signer.getAddress();
    const seen = kms.requests.length;
    kms.always('throttle');
    try {
      await assert.rejects(signer.sign(request(tx())), (err: unknown) => {
        isCode(TemporaryMovementError, 'SIGNER_KMS_THROTTLED')(err);
        assert.equal((err as TemporaryMovementError).details.retry_after_seconds, 5);
        return true;
      });
      assert.equal(signsOf(seen), 3);
      assert.deepEqual(kms.requests.slice(seen).map((r) => r.attempt), ['attempt=1; max=3', 'attempt=2; max=3', 'attempt=3; max=3']);
    } finally {
      kms.always(null);
    }
    // Once KMS recovers, the same signer signs.
    assert.equal((await signer.sign(request(tx()))).signature_format, 'evm_signed_tx');
    await signer.close();
  });

  test('an internal KMS failure is retried, then temporary SIGNER_KMS_UNAVAILABLE; one blip is absorbed by the retry', async () => {
    const signer = kmsSigner();
    await signer.getAddress();
    let seen = kms.requests.length;
    kms.always('internal');
    try {
      await assert.rejects(signer.sign(request(tx())), isCode(TemporaryMovementError, 'SIGNER_KMS_UNAVAILABLE'));
      assert.equal(signsOf(seen), 3);
    } finally {
      kms.always(null);
    }
    seen = kms.requests.length;
    kms.script('internal');
    assert.equal((await signer.sign(request(tx()))).signature_format, 'evm_signed_tx');
    assert.equal(signsOf(seen), 2);
    await signer.close();
  });

  test('a wrong key id, a disabled key and refused credentials are typed fatal errors, not retried', async () => {
    const wrongKey = kmsSigner({ keyId: '00000000-0000-0000-0000-000000000000' });
    let seen = kms.requests.length;
    await assert.rejects(wrongKey.health(), isCode(FatalMovementError, 'SIGNER_KMS_KEY_NOT_FOUND'));
    await assert.rejects(wrongKey.sign(request(tx())), isCode(FatalMovementError, 'SIGNER_KMS_KEY_NOT_FOUND'));
    assert.equal(kms.requests.length - seen, 2, 'one request each, no retry');
    await wrongKey.close();

    const signer = kmsSigner();
    await signer.getAddress();
    kms.script('disabled');
    await assert.rejects(signer.sign(request(tx())), isCode(FatalMovementError, 'SIGNER_KMS_KEY_DISABLED'));
    await signer.close();

    const stranger = kmsSigner({ credentials: { accessKeyId: 'AKIAOTHER00000000000', secretAccessKey: kms.secretAccessKey } });
    seen = kms.requests.length;
    await assert.rejects(stranger.health(), isCode(FatalMovementError, 'SIGNER_KMS_ACCESS_DENIED'));
    assert.equal(kms.requests.length - seen, 1);
    await stranger.close();
  });

  test('a KMS that does not answer is temporary SIGNER_KMS_UNREACHABLE', async () => {
    const gone = await startKmsEmulator();
    const url = gone.url;
    await gone.stop();
    const signer = kmsSigner({ endpoint: url, maxAttempts: 1 });
    await assert.rejects(signer.sign(request(tx())), isCode(TemporaryMovementError, 'SIGNER_KMS_UNREACHABLE'));
    await signer.close();
  });
});

describe('the KMS signer in the runtime, on anvil', () => {
  function kmsDeps(pool: Parameters<typeof runtimeDeps>[0], signer: AwsKmsEvmSigner, from: Address): WorkerDeps {
    const base = runtimeDeps(pool, { FERRY_SUBMITTING_GRACE_SECONDS_BY_LANE: 'evm=0.001' });
    const executors = new ExecutorRegistry();
    const signers = new SignerRegistry();
    executors.register(new EvmNativeTransferExecutor({ rpcUrl: anvil.url, from, pollSeconds: 0 }));
    signers.register(signer);
    return { ...base, executors, signers };
  }
  const transfer = (key: string, to: Address) => nativeTransferPlan(key, { to, value_wei: '4242' }, { signer_key: 'kms_hot' });

  test('a transfer signed by KMS is accepted and mined: sender is the KMS address, the recipient gets the value', async (t) => {
    const db = await scratchDatabase(t);
    const signer = kmsSigner({ executors: [EVM_NATIVE_TRANSFER_KEY], chains: [ANVIL_CHAIN_ID] });
    t.after(() => signer.close());
    const from = (await signer.getAddress()) as Address;
    await anvil.rpc('anvil_setBalance', [from, `0x${parseEther('1').toString(16)}`]);
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const deps = kmsDeps(db.pool, signer, from);

    const id = await approvedMovement(deps, transfer(`kms-ok-${Date.now()}`, to), {});
    await drain(deps);

    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.pay.node_state, 'COMPLETED', `${s.byKey.pay.error_code}: ${s.byKey.pay.error_detail}`);
    const hash = s.byKey.pay.provider_refs.tx_hash as Hex;
    const mined = await chain.getTransaction({ hash });
    assert.equal(mined.from.toLowerCase(), kms.address);
    assert.equal((await chain.getTransactionReceipt({ hash })).status, 'success');
    assert.equal(await chain.getBalance({ address: to }), 4242n);
  });

  test('a throttled KMS defers the node (nothing signed, nothing sent); once KMS answers it completes', async (t) => {
    const db = await scratchDatabase(t);
    const signer = kmsSigner({ maxAttempts: 1 });
    t.after(() => signer.close());
    const from = (await signer.getAddress()) as Address;
    await anvil.rpc('anvil_setBalance', [from, `0x${parseEther('1').toString(16)}`]);
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const deps = kmsDeps(db.pool, signer, from);
    const nonce = await chain.getTransactionCount({ address: from, blockTag: 'pending' });

    kms.always('throttle');
    let s;
    let id: string;
    try {
      id = await approvedMovement(deps, transfer(`kms-throttled-${Date.now()}`, to), {});
      await drain(deps);
      s = await snapshot(db.pool, id);
    } finally {
      kms.always(null);
    }
    assert.equal(s.byKey.pay.node_state, 'READY', 'deferred, not failed');
    assert.equal(s.byKey.pay.error_code, 'SIGNER_KMS_THROTTLED');
    assert.ok(s.byKey.pay.dispatch_after && s.byKey.pay.dispatch_after > new Date(), 'with a later dispatch time');
    assert.ok(!(await artifactsOfNodes(db.pool, [s.byKey.pay.id])).some((a) => a.artifact_type === 'signature'));
    assert.equal(await chain.getTransactionCount({ address: from, blockTag: 'pending' }), nonce);

    // The deferral is over (backdated, not waited for): the next dispatch signs and sends.
    await db.pool.query(`UPDATE request_nodes SET dispatch_after = now() - interval '1 second' WHERE id = $1`, [s.byKey.pay.id]);
    await drain(deps);
    s = await snapshot(db.pool, id);
    assert.equal(s.byKey.pay.node_state, 'COMPLETED', `${s.byKey.pay.error_code}: ${s.byKey.pay.error_detail}`);
    assert.equal(await chain.getBalance({ address: to }), 4242n);
  });

  test('a KMS key that does not exist fails the node with SIGNER_KMS_KEY_NOT_FOUND', async (t) => {
    const db = await scratchDatabase(t);
    const signer = kmsSigner({ keyId: 'alias/missing' });
    t.after(() => signer.close());
    const deps = kmsDeps(db.pool, signer, privateKeyToAccount(generatePrivateKey()).address);
    const id = await approvedMovement(deps, transfer(`kms-missing-${Date.now()}`, privateKeyToAccount(generatePrivateKey()).address), {});
    await drain(deps);
    const s = await snapshot(db.pool, id);
    assert.equal(s.byKey.pay.node_state, 'FAILED');
    assert.equal(s.byKey.pay.error_code, 'SIGNER_KMS_KEY_NOT_FOUND');
  });
});

describe('createSignerFromConfig', () => {
  const entries = ConfigFileSchema.parse({
    evm: {
      chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: 'http://127.0.0.1:1', max_fee_per_gas_cap_wei: '500000000000' }],
      signers: [
        { key: 'dev', kind: 'local_key', private_key_env: 'DEV_KEY', chains: [ANVIL_CHAIN_ID], executors: [EVM_NATIVE_TRANSFER_KEY] },
        {
          key: 'vault',
          kind: 'aws_kms',
          kms: { key_id: 'k', region: 'eu-west-1', endpoint: 'http://127.0.0.1:1', access_key_id_env: 'KMS_ID', secret_access_key_env: 'KMS_SECRET' },
          chains: [ANVIL_CHAIN_ID],
        },
      ],
    },
  }).evm.signers;

  test('builds a local key signer and a KMS signer, each with its chains and executors', async () => {
    const key = generatePrivateKey();
    const dev = createSignerFromConfig(entries[0]!, { DEV_KEY: key });
    assert.ok(dev instanceof LocalPrivateKeySignerEvm);
    assert.equal(await dev.getAddress(), privateKeyToAccount(key).address.toLowerCase());
    await assert.rejects(dev.sign(request(tx(), { executor_key: 'exec.other' })), isCode(FatalMovementError, 'SIGNER_POLICY_VIOLATION'));
    const vault = createSignerFromConfig(entries[1]!, { KMS_ID: 'AKIA1', KMS_SECRET: 's3cr3t-value' });
    assert.ok(vault instanceof AwsKmsEvmSigner);
    assert.equal(vault.signerKey, 'vault');
    await vault.close();
  });

  test('an unset or unusable variable is a ConfigError naming it, never its value', () => {
    assert.throws(() => createSignerFromConfig(entries[0]!, {}), (e: unknown) => e instanceof ConfigError && e.variable === 'DEV_KEY');
    assert.throws(
      () => createSignerFromConfig(entries[0]!, { DEV_KEY: '0xnot-a-key-at-all' }),
      (e: unknown) => e instanceof ConfigError && e.variable === 'DEV_KEY' && !e.message.includes('not-a-key'),
    );
    assert.throws(() => createSignerFromConfig(entries[1]!, { KMS_ID: 'AKIA1' }), (e: unknown) => e instanceof ConfigError && e.variable === 'KMS_SECRET');
  });
});

describe('credentials', () => {
  test("without static keys the AWS SDK's default credential chain supplies them (here from the environment)", async (t) => {
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    process.env.AWS_ACCESS_KEY_ID = kms.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = kms.secretAccessKey;
    t.after(() => {
      for (const [name, value] of [['AWS_ACCESS_KEY_ID', saved.id], ['AWS_SECRET_ACCESS_KEY', saved.secret]] as const) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    });
    const [entry] = ConfigFileSchema.parse({
      evm: {
        chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: 'http://127.0.0.1:1', max_fee_per_gas_cap_wei: '500000000000' }],
        signers: [{ key: 'role', kind: 'aws_kms', kms: { key_id: kms.keyId, region: kms.region, endpoint: kms.url }, chains: [ANVIL_CHAIN_ID] }],
      },
    }).evm.signers;
    // No variable of Ferry's own is read: the chain finds what the platform provides.
    const signer = createSignerFromConfig(entry!, {});
    assert.ok(signer instanceof AwsKmsEvmSigner);
    assert.equal(await signer.getAddress(), kms.address);
    await signer.close();
  });

  test('no credentials anywhere in the default chain: the node is deferred (temporary), not failed', async (t) => {
    const names = ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE', 'AWS_SHARED_CREDENTIALS_FILE', 'AWS_CONFIG_FILE', 'AWS_WEB_IDENTITY_TOKEN_FILE', 'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI', 'AWS_CONTAINER_CREDENTIALS_FULL_URI'];
    const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
    for (const n of names) delete process.env[n];
    // No shared files either (the chain would read ~/.aws otherwise).
    process.env.AWS_SHARED_CREDENTIALS_FILE = '/nonexistent/ferry-test/credentials';
    process.env.AWS_CONFIG_FILE = '/nonexistent/ferry-test/config';
    t.after(() => {
      for (const n of names) {
        if (saved[n] === undefined) delete process.env[n];
        else process.env[n] = saved[n];
      }
    });
    const signer = kmsSigner({ credentials: undefined, maxAttempts: 1 });
    try {
      await assert.rejects(signer.getAddress(), (err: unknown) => {
        assert.ok(err instanceof TemporaryMovementError, String(err));
        assert.equal(err.code, 'SIGNER_KMS_CREDENTIALS_UNAVAILABLE');
        return true;
      });
    } finally {
      await signer.close();
    }
  });

  test('static keys go by pairs: one variable without the other is refused naming the setting', () => {
    const parsed = ConfigFileSchema.safeParse({
      evm: {
        chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: 'http://127.0.0.1:1', max_fee_per_gas_cap_wei: '500000000000' }],
        signers: [{ key: 'half', kind: 'aws_kms', kms: { key_id: 'k', region: 'eu-west-1', endpoint: 'http://127.0.0.1:1', access_key_id_env: 'KMS_ID' }, chains: [ANVIL_CHAIN_ID] }],
      },
    });
    assert.equal(parsed.success, false);
    assert.match(JSON.stringify(parsed.error!.issues), /secret_access_key_env/);
  });

  test('expired session credentials defer the signature (temporary, retried once they are refreshed); nothing is signed', async () => {
    kms.script('expired_token');
    const signer = kmsSigner({ maxAttempts: 1 });
    try {
      await assert.rejects(signer.getAddress(), (err: unknown) => {
        assert.ok(err instanceof TemporaryMovementError, String(err));
        assert.equal(err.code, 'SIGNER_KMS_CREDENTIALS_EXPIRED');
        assert.ok(Number(err.details.retry_after_seconds) > 0);
        return true;
      });
      // Refreshed credentials (the emulator answers again): the same signer goes on.
      assert.equal(await signer.getAddress(), kms.address);
    } finally {
      await signer.close();
    }
  });
});

test('parseDerSignature reads minimal DER and refuses anything else', () => {
  const r = 0x80n << 248n; // high bit set: encoded with a leading zero byte
  const s = 12345n;
  assert.deepEqual(parseDerSignature(derSignature(r, s)), { r, s });
  const good = derSignature(r, s);
  assert.equal(parseDerSignature(Buffer.concat([good, Buffer.from([0])])), null, 'trailing bytes');
  assert.equal(parseDerSignature(good.subarray(0, good.length - 1)), null, 'truncated');
  assert.equal(parseDerSignature(Buffer.from([0x31, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01])), null, 'not a SEQUENCE');
  assert.equal(parseDerSignature(Buffer.from([0x30, 0x06, 0x02, 0x01, 0x00, 0x02, 0x01, 0x01])), null, 'r = 0');
  assert.equal(parseDerSignature(Buffer.from([0x30, 0x06, 0x02, 0x01, 0x81, 0x02, 0x01, 0x01])), null, 'negative r');
});
