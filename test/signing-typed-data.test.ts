import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { hexToSignature, maxUint256, verifyTypedData, type Hex, type TypedDataDefinition } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ConfigFileSchema } from '../src/config-file.ts';
import { FatalMovementError, TemporaryMovementError } from '../src/executors/errors.ts';
import { deriveExpectedEffect, resolveSigningEffect } from '../src/executors/evm/expected-effect.ts';
import { payloadHash } from '../src/executors/payload-hash.ts';
import type { ExpectedEffect, SignRequest } from '../src/executors/protocol.ts';
import { LocalPrivateKeySignerEvm } from '../src/executors/signers/local-private-key-evm.ts';
import { RemoteSignerProxy } from '../src/executors/signers/remote-proxy.ts';
import { listenHost, type ListeningHost } from '../src/hosts/common.ts';
import { signerHostApp } from '../src/hosts/signer-host.ts';
import { EVIDENCE, requestSigner, requestVerifier } from './helpers/host-requests.ts';

/**
 * Issue 25, item 9: EIP-712 typed data (an EIP-2612 permit, as a CCTP burn's allowance for the
 * TokenMessengerV2 would be) signed under the same approval-bound policy as transactions. Each
 * hostile payload below is refused with SIGNER_POLICY_VIOLATION and its rule, and each of them is
 * one that the naive path (viem's signTypedData over whatever the executor sent) signs.
 */

const CHAIN = 8453;
const USDC = '0x833589fcd6edb6e08f4c7c32d4f71b54bda02913';
const MESSENGER = '0x28b5a0e9c621a5badaa536219b3a228c8168cf5d';
const ATTACKER = '0x6666666666666666666666666666666666666666';
const EXECUTOR = 'exec.evm.permit';
const NOW_MS = Date.UTC(2026, 0, 1);
const NOW = NOW_MS / 1000;
const KEY = generatePrivateKey();
const OWNER = privateKeyToAccount(KEY).address.toLowerCase();

const effect: ExpectedEffect = {
  chain_id: CHAIN,
  asset: USDC,
  to: MESSENGER,
  amount_base_units: '100000000',
  token_method: 'permit',
  token_decimals: 6,
  token_symbol: 'USDC',
  typed_data: { primary_type: 'Permit', domain: { name: 'USD Coin', version: '2', chainId: CHAIN, verifyingContract: USDC }, deadline_max_seconds: 3600 },
};

type Payload = { types: Record<string, Array<{ name: string; type: string }>>; primaryType: string; domain: Record<string, unknown>; message: Record<string, unknown> };

/** The honest permit: 100 USDC for the messenger, nonce 0, a deadline 30 minutes ahead. */
function permit(): Payload {
  return {
    types: {
      EIP712Domain: [
        { name: 'name', type: 'string' },
        { name: 'version', type: 'string' },
        { name: 'chainId', type: 'uint256' },
        { name: 'verifyingContract', type: 'address' },
      ],
      Permit: [
        { name: 'owner', type: 'address' },
        { name: 'spender', type: 'address' },
        { name: 'value', type: 'uint256' },
        { name: 'nonce', type: 'uint256' },
        { name: 'deadline', type: 'uint256' },
      ],
    },
    primaryType: 'Permit',
    domain: { name: 'USD Coin', version: '2', chainId: CHAIN, verifyingContract: USDC },
    message: { owner: OWNER, spender: MESSENGER, value: '100000000', nonce: '0', deadline: String(NOW + 1800) },
  };
}

function request(payload: Payload | string, over: Partial<SignRequest> = {}, format = 'eip712'): SignRequest {
  const text = typeof payload === 'string' ? payload : JSON.stringify(payload);
  return {
    protocol_version: '1.0',
    request_id: 'req-1',
    request_node_id: 'node-1',
    ...EVIDENCE,
    signing_intent: { action: 'evm_permit', asset: 'USDC', amount: '100', destination: MESSENGER, max_fee_usd: null, chain_family: 'evm', allowed_payload_hash: payloadHash(text) },
    payload_format: format,
    payload: text,
    payload_hash: payloadHash(text),
    metadata: {},
    executor_key: EXECUTOR,
    expected_effect: effect,
    ...over,
  };
}

const nonceReads: Array<[number, string, string]> = [];
let onChainNonce = 0n;
function signer(over: Partial<ConstructorParameters<typeof LocalPrivateKeySignerEvm>[0]> = {}) {
  return new LocalPrivateKeySignerEvm({
    signerKey: 'hot',
    privateKey: KEY,
    chains: [CHAIN],
    typedData: new Map([[EXECUTOR, new Set(['Permit'])]]),
    tokenNonces: async (chainId, token, owner) => {
      nonceReads.push([chainId, token, owner]);
      return onChainNonce;
    },
    now: () => NOW_MS,
    ...over,
  });
}

/** The naive path: the key signs the typed data as sent. Every hostile case gets a signature there. */
const naive = (p: Payload) => privateKeyToAccount(KEY).signTypedData(p as unknown as TypedDataDefinition);

const violates = (rule: string) => (err: unknown) => {
  assert.ok(err instanceof FatalMovementError, String(err));
  assert.equal(err.code, 'SIGNER_POLICY_VIOLATION', err.message);
  assert.equal(err.details.rule, rule, err.message);
  return true;
};

describe('typed data signed by policy', () => {
  test('an honest permit is signed: 65 bytes, v 27 or 28, verifying for the signer, the same as viem signs it', async () => {
    nonceReads.length = 0;
    const r = await signer().sign(request(permit()));
    assert.equal(r.signature_format, 'eip712_signature');
    assert.equal(r.signer_ref, `local_evm:${OWNER}`);
    assert.match(r.signature, /^0x[0-9a-f]{130}$/);
    const sig = hexToSignature(r.signature as Hex);
    assert.ok(sig.v === 27n || sig.v === 28n);
    assert.equal(await verifyTypedData({ ...(permit() as unknown as TypedDataDefinition), address: OWNER as Hex, signature: r.signature as Hex }), true);
    assert.equal(r.signature, await naive(permit()));
    // The nonce was read by the signer side, for the token and owner of the permit.
    assert.deepEqual(nonceReads, [[CHAIN, USDC, OWNER]]);
  });

  test("the reference protocol's eip712_compact is the same payload; a domain without EIP712Domain types is accepted", async () => {
    const p = permit();
    delete (p.types as Record<string, unknown>).EIP712Domain;
    const r = await signer().sign(request(p, {}, 'eip712_compact'));
    assert.equal(await verifyTypedData({ ...(permit() as unknown as TypedDataDefinition), address: OWNER as Hex, signature: r.signature as Hex }), true);
  });

  test('a value below the approved amount is signed (an allowance of at most what was approved)', async () => {
    const p = permit();
    p.message.value = '5';
    await signer().sign(request(p));
  });

  const hostile: Array<[string, string, (p: Payload) => void]> = [
    ['spender = the attacker', 'spender', (p) => (p.message.spender = ATTACKER)],
    ['value = max uint256', 'amount', (p) => (p.message.value = maxUint256.toString())],
    ['one base unit more than approved', 'amount', (p) => (p.message.value = '100000001')],
    ['another chain id', 'chain_id', (p) => (p.domain.chainId = 1)],
    ['another verifying contract', 'verifying_contract', (p) => (p.domain.verifyingContract = ATTACKER)],
    ['a deadline a year ahead', 'deadline', (p) => (p.message.deadline = String(NOW + 365 * 86400))],
    ['a deadline one second past the window', 'deadline', (p) => (p.message.deadline = String(NOW + 3601))],
    ['a deadline already passed', 'deadline', (p) => (p.message.deadline = String(NOW - 1))],
    ['a later nonce (valid once this one is used)', 'nonce', (p) => (p.message.nonce = '1')],
    ['another owner', 'owner', (p) => (p.message.owner = ATTACKER)],
    ['another domain name', 'domain_name', (p) => (p.domain.name = 'USDC')],
    ['another domain version', 'domain_version', (p) => (p.domain.version = '1')],
    [
      'a domain with an extra salt field',
      'domain_fields',
      (p) => {
        p.domain.salt = `0x${'ab'.repeat(32)}`;
        p.types.EIP712Domain!.push({ name: 'salt', type: 'bytes32' });
      },
    ],
    [
      'a domain without its version',
      'domain_fields',
      (p) => {
        delete p.domain.version;
        p.types.EIP712Domain = p.types.EIP712Domain!.filter((f) => f.name !== 'version');
      },
    ],
    ['EIP712Domain types in another order', 'domain_fields', (p) => p.types.EIP712Domain!.reverse()],
    ['a domain with a field EIP712Domain does not have', 'domain_fields', (p) => (p.domain.spender = ATTACKER)],
    [
      'a Permit type with an extra field',
      'typed_data_types',
      (p) => {
        p.types.Permit!.push({ name: 'memo', type: 'string' });
        p.message.memo = 'invoice 42';
      },
    ],
    ['the Permit fields reordered', 'typed_data_types', (p) => p.types.Permit!.reverse()],
    ['a second struct type', 'typed_data_types', (p) => (p.types.Extra = [{ name: 'x', type: 'uint256' }])],
  ];
  for (const [name, rule, mutate] of hostile) {
    test(`refused: ${name} (${rule}); the naive path signs it`, async () => {
      const p = permit();
      mutate(p);
      assert.match(await naive(p), /^0x[0-9a-f]{130}$/);
      await assert.rejects(signer().sign(request(p)), violates(rule));
    });
  }

  test('refused: a message with an extra field (message_fields); the naive path signs it, ignoring the field', async () => {
    const p = permit();
    p.message.note = 'hello';
    assert.equal(await naive(p), await naive(permit()));
    await assert.rejects(signer().sign(request(p)), violates('message_fields'));
  });

  test('refused: a Permit2 PermitSingle and an order, primary types the signer does not sign for the executor; the naive path signs them', async () => {
    const permit2: Payload = {
      types: {
        PermitSingle: [
          { name: 'details', type: 'PermitDetails' },
          { name: 'spender', type: 'address' },
          { name: 'sigDeadline', type: 'uint256' },
        ],
        PermitDetails: [
          { name: 'token', type: 'address' },
          { name: 'amount', type: 'uint160' },
          { name: 'expiration', type: 'uint48' },
          { name: 'nonce', type: 'uint48' },
        ],
      },
      primaryType: 'PermitSingle',
      domain: { name: 'Permit2', chainId: CHAIN, verifyingContract: '0x000000000022d473030f116ddee9f6b43ac78ba3' },
      message: { details: { token: USDC, amount: (2n ** 160n - 1n).toString(), expiration: '281474976710655', nonce: '0' }, spender: ATTACKER, sigDeadline: String(NOW + 600) },
    };
    const order: Payload = {
      types: {
        Order: [
          { name: 'maker', type: 'address' },
          { name: 'sellToken', type: 'address' },
          { name: 'sellAmount', type: 'uint256' },
          { name: 'buyAmount', type: 'uint256' },
        ],
      },
      primaryType: 'Order',
      domain: { name: 'Exchange', version: '1', chainId: CHAIN, verifyingContract: ATTACKER },
      message: { maker: OWNER, sellToken: USDC, sellAmount: '100000000', buyAmount: '1' },
    };
    for (const p of [permit2, order]) {
      assert.match(await naive(p), /^0x[0-9a-f]{130}$/);
      await assert.rejects(signer().sign(request(p)), violates('typed_data_not_allowed'));
    }
    // A signer configured to sign PermitSingle still refuses it: the plan approved a Permit.
    const lax = signer({ typedData: new Map([[EXECUTOR, new Set(['Permit', 'PermitSingle'])]]) });
    await assert.rejects(lax.sign(request(permit2)), violates('primary_type'));
    // And one approved as PermitSingle: a struct the signer cannot check is never signed.
    const asPermit2 = { ...effect, typed_data: { ...effect.typed_data!, primary_type: 'PermitSingle' } };
    await assert.rejects(lax.sign(request(permit2, { expected_effect: asPermit2 })), violates('primary_type'));
  });

  test('refused: an executor the signer signs no typed data for, and a signer configured for none (the default)', async () => {
    await assert.rejects(signer().sign(request(permit(), { executor_key: 'exec.evm.erc20_transfer' })), violates('typed_data_not_allowed'));
    await assert.rejects(signer({ typedData: undefined }).sign(request(permit())), violates('typed_data_not_allowed'));
    await assert.rejects(signer().sign(request(permit(), { executor_key: undefined })), violates('executor_not_named'));
    // The executor allowlist of transactions holds for typed data too.
    await assert.rejects(signer({ executors: ['exec.cctp.burn'] }).sign(request(permit())), violates('executor_not_allowed'));
  });

  test('refused: a plan that approved a transaction, or nothing, for the node', async () => {
    const transfer: ExpectedEffect = { chain_id: CHAIN, asset: USDC, to: MESSENGER, amount_base_units: '100000000', token_method: 'approve', max_fee_per_gas_cap_wei: '1000000000' };
    await assert.rejects(signer().sign(request(permit(), { expected_effect: transfer })), violates('typed_data_not_approved'));
    await assert.rejects(signer().sign(request(permit(), { expected_effect: null, expected_effect_unavailable: 'no effect' })), violates('no_expected_effect'));
    await assert.rejects(signer({ chains: [1] }).sign(request(permit())), violates('chain_not_served'));
  });

  test('the nonce: pinned by the plan, or read by the signer side; neither is refused; a failed read defers', async () => {
    const pinned = { ...effect, typed_data: { ...effect.typed_data!, nonce: '7' } };
    const p = permit();
    p.message.nonce = '7';
    nonceReads.length = 0;
    await signer({ tokenNonces: undefined }).sign(request(p, { expected_effect: pinned }));
    await assert.rejects(signer({ tokenNonces: undefined }).sign(request(permit(), { expected_effect: pinned })), violates('nonce'));
    assert.equal(nonceReads.length, 0);
    await assert.rejects(signer({ tokenNonces: undefined }).sign(request(permit())), violates('nonce_unverified'));
    onChainNonce = 3n;
    await assert.rejects(signer().sign(request(permit())), violates('nonce'));
    onChainNonce = 0n;
    const down = signer({ tokenNonces: async () => Promise.reject(new Error('ECONNREFUSED')) });
    await assert.rejects(down.sign(request(permit())), (e: unknown) => e instanceof TemporaryMovementError && e.code === 'SIGNER_NONCE_UNREADABLE');
  });

  test('a deadline window the plan gives is bounded by the signer to one day', async () => {
    const wide = { ...effect, typed_data: { ...effect.typed_data!, deadline_max_seconds: 30 * 86400 } };
    const p = permit();
    p.message.deadline = String(NOW + 86400);
    await signer().sign(request(p, { expected_effect: wide }));
    p.message.deadline = String(NOW + 86401);
    await assert.rejects(signer().sign(request(p, { expected_effect: wide })), violates('deadline'));
  });

  test('malformed typed data is SIGNER_PAYLOAD_INVALID; a permit effect never signs a transaction', async () => {
    const invalid = (e: unknown) => e instanceof FatalMovementError && e.code === 'SIGNER_PAYLOAD_INVALID';
    await assert.rejects(signer().sign(request('not json')), invalid);
    await assert.rejects(signer().sign(request(JSON.stringify({ ...permit(), extra: 1 }))), invalid);
    await assert.rejects(signer().sign(request(JSON.stringify(permit()).replace('"domain":{', '"domain":{"__proto__":{"salt":"0x00"},'))), invalid);
    const p = permit();
    p.message.value = '1e6';
    await assert.rejects(signer().sign(request(p)), invalid);
    const p2 = permit();
    p2.message.value = 100000000.5;
    await assert.rejects(signer().sign(request(p2)), invalid);
    // An approve transaction for the same token and spender, against the permit's effect.
    const { serializeTransaction, encodeFunctionData, erc20Abi } = await import('viem');
    const tx = serializeTransaction({
      type: 'eip1559',
      chainId: CHAIN,
      nonce: 0,
      to: USDC,
      data: encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [MESSENGER, 100000000n] }),
      gas: 60_000n,
      maxFeePerGas: 1n,
      maxPriorityFeePerGas: 1n,
    });
    await assert.rejects(signer().sign(request(tx, {}, 'evm_raw_tx')), violates('typed_data_effect'));
  });
});

describe('typed data derived from the approved plan (config.token_permit)', () => {
  const evm = ConfigFileSchema.parse({
    evm: {
      chains: [{ chain_id: CHAIN, rpc_url: 'http://127.0.0.1:9', max_fee_per_gas_cap_wei: '1000000000', cctp: { domain: 6, token_messenger: MESSENGER, message_transmitter: ATTACKER } }],
      tokens: [{ chain_id: CHAIN, symbol: 'USDC', address: USDC, decimals: 6, eip712: { name: 'USD Coin', version: '2' } }],
    },
  }).evm;
  const plan = (config: Record<string, unknown>) => ({
    nodes: [{ node_key: 'permit', executor_binding: { executor_key: EXECUTOR }, signer_binding: { signer_key: 'hot', chain_id: CHAIN }, config }],
  });

  test('a permit of 100 USDC for the chain\'s TokenMessengerV2: domain from evm.tokens, spender, base units, window', () => {
    const r = deriveExpectedEffect({ plan: plan({ token_permit: { token: 'USDC', spender: 'cctp.token_messenger', amount: '100', deadline_seconds: 600 } }), nodeKey: 'permit', intent: {}, evm });
    assert.ok(r.ok, r.ok ? '' : r.reason);
    assert.deepEqual(r.effect, {
      ...effect,
      typed_data: { ...effect.typed_data!, deadline_max_seconds: 600 },
    });
  });

  test('no effect without the token\'s eip712 domain, with a window over a day, or a spender that is a $ref', () => {
    const bare = { ...evm, tokens: [{ ...evm.tokens[0]!, eip712: undefined }] };
    const r1 = deriveExpectedEffect({ plan: plan({ token_permit: { token: 'USDC', spender: MESSENGER, amount: '100' } }), nodeKey: 'permit', intent: {}, evm: bare });
    assert.ok(!r1.ok && /eip712 domain/.test(r1.reason));
    const r2 = deriveExpectedEffect({ plan: plan({ token_permit: { token: 'USDC', spender: MESSENGER, amount: '100', deadline_seconds: 86401 } }), nodeKey: 'permit', intent: {}, evm });
    assert.ok(!r2.ok && /deadline_seconds/.test(r2.reason));
    const r3 = deriveExpectedEffect({ plan: plan({ token_permit: { token: 'USDC', spender: '$ref:other.provider_refs.spender', amount: '100' } }), nodeKey: 'permit', intent: {}, evm });
    assert.ok(!r3.ok && /reference/.test(r3.reason));
    const r4 = deriveExpectedEffect({
      plan: plan({ token_permit: { token: 'USDC', spender: MESSENGER, amount: '100' }, token_approval: { token: 'USDC', spender: MESSENGER, amount: '100' } }),
      nodeKey: 'permit',
      intent: {},
      evm,
    });
    assert.ok(!r4.ok && /one payload/.test(r4.reason));
  });

  test("a token's domain changed since the approval refuses the node (effect_changed_since_approval), not signed with either", () => {
    const input = { plan: plan({ token_permit: { token: 'USDC', spender: MESSENGER, amount: '100' } }), nodeKey: 'permit', intent: {} };
    const pinned = deriveExpectedEffect({ ...input, evm });
    assert.ok(pinned.ok);
    const now = { ...evm, tokens: [{ ...evm.tokens[0]!, eip712: { name: 'USD Coin', version: '3' } }] };
    const r = resolveSigningEffect({ effect: pinned.effect, unavailable: null }, { ...input, evm: now });
    assert.ok(!r.ok && r.changed !== undefined && /typed_data/.test(r.changed), JSON.stringify(r));
  });
});

describe('typed data through a remote signer host', () => {
  const TOKEN = 'typed-data-host-token-0123456789abcdef';
  let host: ListeningHost;
  let hostSigns = 0;
  before(async () => {
    const inner = signer();
    const counting = { signerKey: inner.signerKey, sign: (r: SignRequest) => (hostSigns++, inner.sign(r)) };
    host = await listenHost(signerHostApp({ signer: counting, token: TOKEN, verifier: requestVerifier(), log: pino({ level: 'silent' }) }), '127.0.0.1', 0);
  });
  after(async () => host?.stop());

  const proxy = (evmPolicy?: ConstructorParameters<typeof RemoteSignerProxy>[0]['evmPolicy']) =>
    new RemoteSignerProxy({ signerKey: 'hot', baseUrl: host.url, token: TOKEN, requestSigner, evmPolicy });

  test("the host signs an honest permit with its own key and nonce reader; it refuses a hostile one by its own policy", async () => {
    const plain = proxy();
    const r = await plain.sign(request(permit()));
    assert.equal(await verifyTypedData({ ...(permit() as unknown as TypedDataDefinition), address: OWNER as Hex, signature: r.signature as Hex }), true);
    const p = permit();
    p.message.spender = ATTACKER;
    // No policy in the proxy: the request reaches the host, whose signer refuses it.
    await assert.rejects(
      plain.sign(request(p)),
      (e: unknown) => e instanceof FatalMovementError && e.code === 'REMOTE_SIGNER_REJECTED' && /SIGNER_POLICY_VIOLATION/.test(String(e.details.body)) && /spender/.test(String(e.details.body)),
    );
    await plain.close();
  });

  test('a proxy with the EVM policy refuses hostile typed data before it leaves the process, and passes the honest one', async () => {
    const checked = proxy({ chains: [CHAIN], typedData: new Map([[EXECUTOR, new Set(['Permit'])]]), now: () => NOW_MS });
    const before = hostSigns;
    for (const mutate of [(p: Payload) => (p.message.spender = ATTACKER), (p: Payload) => (p.message.value = maxUint256.toString()), (p: Payload) => (p.domain.chainId = 1)]) {
      const p = permit();
      mutate(p);
      await assert.rejects(checked.sign(request(p)), (e: unknown) => e instanceof FatalMovementError && e.code === 'SIGNER_POLICY_VIOLATION');
    }
    assert.equal(hostSigns, before);
    await checked.sign(request(permit()));
    assert.equal(hostSigns, before + 1);
    // Without typed_data in its entry, the proxy refuses every typed data, as before.
    await assert.rejects(proxy({ chains: [CHAIN] }).sign(request(permit())), violates('typed_data_not_allowed'));
    await checked.close();
  });
});

describe('typed data in the configuration', () => {
  const entry = (typed_data: unknown) =>
    ConfigFileSchema.safeParse({
      evm: {
        chains: [{ chain_id: CHAIN, rpc_url: 'http://127.0.0.1:9', max_fee_per_gas_cap_wei: '1000000000' }],
        signers: [{ key: 'hot', kind: 'local_key', private_key_env: 'HOT_KEY', chains: [CHAIN], typed_data }],
      },
    });

  test('evm.signers[].typed_data names executors and primary types the signer can check; others stop start', () => {
    assert.ok(entry([{ executor: EXECUTOR, primary_types: ['Permit'] }]).success);
    assert.ok(!entry([{ executor: EXECUTOR, primary_types: ['PermitSingle'] }]).success);
    assert.ok(!entry([{ executor: EXECUTOR, primary_types: [] }]).success);
  });

  test('a signer built from its entry signs the typed data its entry allows, and nothing without it', async () => {
    const { createSignerFromConfig } = await import('../src/executors/signers/from-config.ts');
    const parsed = entry([{ executor: EXECUTOR, primary_types: ['Permit'] }]);
    assert.ok(parsed.success);
    const policy = { tokenNonces: async () => 0n, now: () => NOW_MS };
    const allowed = createSignerFromConfig(parsed.data.evm.signers[0]!, { HOT_KEY: KEY }, policy);
    await allowed.sign(request(permit()));
    const none = entry(undefined);
    assert.ok(none.success);
    await assert.rejects(createSignerFromConfig(none.data.evm.signers[0]!, { HOT_KEY: KEY }, policy).sign(request(permit())), violates('typed_data_not_allowed'));
  });
});
