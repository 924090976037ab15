import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { keccak256, maxUint256, toHex, zeroAddress, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { burnIntentMessage, burnIntentTypedData, decodeAttestation, transferSpecHash, word, type BurnIntent } from '../src/executors/gateway/codec.ts';
import { gatewayTransferFee } from './emulators/gateway-api.ts';
import { tokenBalance } from './helpers/contracts.ts';
import { BASE_FEE, gatewayEvents, startGatewayWorld, writeGateway, type GatewayWorld } from './helpers/gateway.ts';

/**
 * The Gateway test contracts and the emulated API on their own, driven as a client would drive
 * them (no Ferry): approve then deposit credits the depositor's available balance; a signed burn
 * intent is burned on the source and attested; the attestation mints once on the destination. And
 * the strict cases: a plain ERC-20 transfer to the wallet credits nothing, a fee below the
 * published one, a signature of another key, an intent past its max block height, a second intent
 * over a used spec hash, and a replayed attestation are all refused.
 */

let w: GatewayWorld;
before(async () => {
  w = await startGatewayWorld();
});
after(async () => {
  await w?.stop();
});

const fresh = () => privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
let salts = 0;

function intentFor(depositor: Address, value: bigint, opts: { maxFee?: bigint; maxBlockHeight?: bigint; recipient?: Address } = {}): BurnIntent {
  return {
    maxBlockHeight: opts.maxBlockHeight ?? 10n ** 9n,
    maxFee: opts.maxFee ?? 500_000n,
    spec: {
      version: 1,
      sourceDomain: w.source.domain,
      destinationDomain: w.destination.domain,
      sourceContract: word(w.source.wallet.address),
      destinationContract: word(w.destination.minter.address),
      sourceToken: word(w.source.token.address),
      destinationToken: word(w.destination.token.address),
      sourceDepositor: word(depositor),
      destinationRecipient: word(opts.recipient ?? fresh()),
      sourceSigner: word(depositor),
      destinationCaller: word(zeroAddress),
      value,
      salt: keccak256(toHex(`salt-${salts++}-${Date.now()}`)),
      hookData: '0x',
    },
  };
}

async function sign(key: Hex, intent: BurnIntent): Promise<Hex> {
  const t = burnIntentTypedData(intent);
  return privateKeyToAccount(key).signTypedData({ domain: t.domain, types: { BurnIntent: t.types.BurnIntent!, TransferSpec: t.types.TransferSpec! }, primaryType: 'BurnIntent', message: intent as never });
}

async function post(path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${w.api.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

const transfer = async (intent: BurnIntent, signature: Hex) => post('/v1/transfer', [{ burnIntent: burnIntentMessage(intent), signature }]);
const available = (depositor: Address) => w.source.chain.readContract({ address: w.source.wallet.address, abi: w.source.wallet.abi, functionName: 'availableBalance', args: [w.source.token.address, depositor] }) as Promise<bigint>;

async function depositor(amount: bigint): Promise<{ key: Hex; address: Address }> {
  const key = generatePrivateKey();
  const address = privateKeyToAccount(key).address.toLowerCase() as Address;
  await w.source.anvil.rpc('anvil_setBalance', [address, '0xde0b6b3a7640000']);
  await writeGateway(w.source, w.source.token, 'mint', [address, amount]);
  await writeGateway(w.source, w.source.token, 'approve', [w.source.wallet.address, maxUint256], key);
  await writeGateway(w.source, w.source.wallet, 'deposit', [w.source.token.address, amount], key);
  return { key, address };
}

test('deposit, a signed burn intent attested and burned, the attestation minted once on the destination', async () => {
  const d = await depositor(20_000_000n);
  assert.equal(await available(d.address), 20_000_000n, 'the deposit is credited');
  const to = fresh();
  const intent = intentFor(d.address, 10_000_000n, { recipient: to });
  const before = await gatewayEvents(w);
  const r = await transfer(intent, await sign(d.key, intent));
  assert.equal(r.status, 201, JSON.stringify(r.json));
  const fee = BASE_FEE + gatewayTransferFee(10_000_000n);
  assert.equal((r.json.fees as { total: string }).total, fee.toString());
  assert.equal(await available(d.address), 20_000_000n - 10_000_000n - fee, 'value and fee debited');
  assert.equal(await tokenBalance(w.source.chain, w.source.token, w.feeRecipient), fee, 'the fee goes to the fee recipient');
  const after1 = await gatewayEvents(w);
  assert.equal(after1.burned.length - before.burned.length, 1, 'one GatewayBurned');
  const decoded = decodeAttestation(r.json.attestation);
  assert.ok(decoded);
  assert.equal(decoded.specHash, transferSpecHash(intent.spec));

  await writeGateway(w.destination, w.destination.minter, 'gatewayMint', [r.json.attestation, r.json.signature]);
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 10_000_000n, 'minted exactly the value');
  await assert.rejects(writeGateway(w.destination, w.destination.minter, 'gatewayMint', [r.json.attestation, r.json.signature]), /reverted|TransferSpecHashUsed/, 'an attestation mints once');
  // Posting the very same signed intent again burns nothing more and answers the same transfer.
  const again = await transfer(intent, await sign(d.key, intent));
  assert.equal(again.status, 201);
  assert.equal(again.json.transferId, r.json.transferId);
  assert.equal((await gatewayEvents(w)).burned.length, after1.burned.length, 'no second burn');
  // Another intent over the same spec (another max fee) is a duplicate.
  const other = { ...intent, maxFee: intent.maxFee + 1n };
  const dup = await transfer(other, await sign(d.key, other));
  assert.equal(dup.status, 409);
  assert.equal(dup.json.success, false);
  assert.match(String(dup.json.message), /duplicate transfer spec hash/);
});

test('a plain ERC-20 transfer to the GatewayWallet credits nothing: the burn intent is refused for insufficient balance', async () => {
  const key = generatePrivateKey();
  const address = privateKeyToAccount(key).address.toLowerCase() as Address;
  await w.source.anvil.rpc('anvil_setBalance', [address, '0xde0b6b3a7640000']);
  await writeGateway(w.source, w.source.token, 'mint', [address, 50_000_000n]);
  await writeGateway(w.source, w.source.token, 'transfer', [w.source.wallet.address, 50_000_000n], key);
  assert.equal(await available(address), 0n, 'nothing credited on chain');
  const bal = await post('/v1/balances', { token: 'USDC', sources: [{ depositor: address, domain: w.source.domain }] });
  assert.deepEqual((bal.json.balances as Array<{ balance: string }>).map((b) => b.balance), ['0']);
  const intent = intentFor(address, 10_000_000n);
  const r = await transfer(intent, await sign(key, intent));
  assert.equal(r.status, 400);
  assert.match(String(r.json.message), /insufficient balance/);
});

test('strict refusals: fee too low, another signer, expired, value plus fee above the balance', async () => {
  const d = await depositor(10_000_000n);
  const before = (await gatewayEvents(w)).burned.length;
  const cases: Array<[string, () => Promise<{ status: number; json: Record<string, unknown> }>, RegExp]> = [
    [
      'a max fee below the published fee',
      async () => {
        const i = intentFor(d.address, 1_000_000n, { maxFee: BASE_FEE });
        return transfer(i, await sign(d.key, i));
      },
      /maxFee \d+ is too low/,
    ],
    [
      'signed by another key',
      async () => {
        const i = intentFor(d.address, 1_000_000n);
        return transfer(i, await sign(generatePrivateKey(), i));
      },
      /invalid signature/,
    ],
    [
      'past its max block height',
      async () => {
        const i = intentFor(d.address, 1_000_000n, { maxBlockHeight: 1n });
        return transfer(i, await sign(d.key, i));
      },
      /expired/,
    ],
    [
      'value plus fee above the available balance',
      async () => {
        const i = intentFor(d.address, 10_000_000n);
        return transfer(i, await sign(d.key, i));
      },
      /insufficient balance/,
    ],
  ];
  for (const [what, run, message] of cases) {
    const r = await run();
    assert.equal(r.status, 400, what);
    assert.equal(r.json.success, false, what);
    assert.match(String(r.json.message), message, what);
  }
  assert.equal((await gatewayEvents(w)).burned.length, before, 'nothing burned');
  assert.equal(await available(d.address), 10_000_000n, 'nothing debited');
});

test('the minter refuses an attestation signed by another key, or altered after signing', async () => {
  const d = await depositor(5_000_000n);
  const to = fresh();
  const intent = intentFor(d.address, 2_000_000n, { recipient: to });
  const r = await transfer(intent, await sign(d.key, intent));
  assert.equal(r.status, 201, JSON.stringify(r.json));
  const attestation = r.json.attestation as Hex;
  const forged = await privateKeyToAccount(generatePrivateKey()).signMessage({ message: { raw: keccak256(attestation) } });
  await assert.rejects(writeGateway(w.destination, w.destination.minter, 'gatewayMint', [attestation, forged]), /reverted|InvalidAttestationSigner/, 'another attester');
  // The value raised by one unit (the last 32-byte word before the salt and hook length): the signature no longer matches.
  const altered = (attestation.slice(0, 2 + 2 * (40 + 272)) + (BigInt(`0x${attestation.slice(2 + 2 * (40 + 272), 2 + 2 * (40 + 304))}`) + 1n).toString(16).padStart(64, '0') + attestation.slice(2 + 2 * (40 + 304))) as Hex;
  assert.equal(decodeAttestation(altered)?.spec.value, 2_000_001n);
  await assert.rejects(writeGateway(w.destination, w.destination.minter, 'gatewayMint', [altered, r.json.signature]), /reverted|InvalidAttestationSigner/, 'an altered attestation');
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 0n, 'nothing minted');
  await writeGateway(w.destination, w.destination.minter, 'gatewayMint', [attestation, r.json.signature]);
  assert.equal(await tokenBalance(w.destination.chain, w.destination.token, to), 2_000_000n, 'the genuine one mints');
});
