/**
 * The CCTP lane's random runs (test/model/lane-run.ts): `cctp_bridge` movements (burn on chain
 * 31337, attestation, mint on chain 31338, arrival) on two anvil chains with the CCTP v2 test
 * contracts and the attestation emulator (test/helpers/cctp.ts), each worker reaching both chains
 * and the attestation service through proxies of its own. Faults beyond the common ones:
 *
 * - kill_burn_before / kill_burn_after: the next burn broadcast is swallowed (never reaches the
 *   chain) or forwarded with its answer held, and the worker that sent it is SIGKILLed;
 * - kill_mint_before / kill_mint_after: the same for the next mint (receiveMessage);
 * - kill_attestation: the next complete attestation is held from the worker that asked, which is
 *   SIGKILLed;
 * - rpc_stall: both chains' RPC stop answering for a while;
 * - attestation_down: the attestation service is unreachable for a while;
 * - attestation_slow: for a while its answers come after the client's timeout.
 *
 * Then the chains are read: S1, exactly one DepositForBurn per approved burn node and exactly one
 * mint (MintAndWithdraw) per burn, no burn from the run's wallet and no received message that no
 * movement's burn accounts for (S2: nothing minted without an approved burn); S3, each burn of the
 * approved amount to the approved recipient, the transactions the nodes record, and the recipient
 * holding exactly the approved amount on the destination chain; S4, nothing burned for a movement
 * that did not complete.
 */
import { encodeAbiParameters, keccak256, maxUint256, pad, parseTransaction, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { cctpBridgeTemplate } from '../../scripts/sandbox/templates.ts';
import type { Pool } from '../../src/persistence/db.ts';
import type { TemplateDefinitionInput } from '../../src/plan/template-schema.ts';
import { messageTransmitterAbi } from '../../src/executors/cctp/message.ts';
import { ANVIL_DEV_KEY, freshAddress } from '../helpers/anvil.ts';
import { cctpConfigFile, DESTINATION_CHAIN_ID, DESTINATION_DOMAIN, SOURCE_CHAIN_ID, SOURCE_DOMAIN, write, type CctpWorld } from '../helpers/cctp.ts';
import { sendCall, tokenBalance } from '../helpers/contracts.ts';
import { startFaultProxy, type FaultProxy, type ProxiedRequest } from '../helpers/fault-proxy.ts';
import { seedMovement } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/wait.ts';
import type { FaultSpec, LaneDefinition, LaneInstance, LaneRunOptions, RunContext, RunMovement } from './lane-run.ts';

export type CctpFault = 'kill_burn_before' | 'kill_burn_after' | 'kill_mint_before' | 'kill_mint_after' | 'kill_attestation' | 'rpc_stall' | 'attestation_down' | 'attestation_slow';

const SLOW_BY_MS = 6000;
const back = (s: { ms: number }) => `back after ${s.ms} ms`;

// The kills at a step are armed early (the approvals spread over the first half of the run), so
// that most of them find a burn, an attestation or a mint still to come.
export const CCTP_FAULTS: Record<CctpFault, FaultSpec> = {
  kill_burn_before: { window: [0, 0.3], ms: [0, 1500], describe: (s) => `arm: the next burn broadcast never reaches the chain, its sender is SIGKILLed; ${back(s)}` },
  kill_burn_after: { window: [0, 0.3], ms: [0, 1500], describe: (s) => `arm: the next burn reaches the chain, its sender is SIGKILLed before the answer; ${back(s)}` },
  kill_mint_before: { window: [0, 0.4], ms: [0, 1500], describe: (s) => `arm: the next mint broadcast never reaches the chain, its sender is SIGKILLed; ${back(s)}` },
  kill_mint_after: { window: [0, 0.4], ms: [0, 1500], describe: (s) => `arm: the next mint reaches the chain, its sender is SIGKILLed before the answer; ${back(s)}` },
  kill_attestation: { window: [0, 0.4], ms: [0, 1500], describe: (s) => `arm: the next complete attestation is held from the worker that asked, which is SIGKILLed; ${back(s)}` },
  rpc_stall: { window: [0.05, 0.8], ms: [1000, 4000], describe: (s) => `both chains' RPC stop answering for ${s.ms} ms` },
  attestation_down: { window: [0.05, 0.8], ms: [1000, 4000], describe: (s) => `the attestation service is unreachable for ${s.ms} ms` },
  attestation_slow: { window: [0.05, 0.8], ms: [1000, 4000], describe: (s) => `for ${s.ms} ms the attestation service answers ${SLOW_BY_MS} ms late (the client gives up at 5000)` },
};

/** A run as CI and `npm run verify` make it (one seed, the same schedule in both): every fault kind once. */
export const CCTP_RUN = {
  movements: 3,
  workers: 2,
  horizonMs: 10_000,
  faults: { crash: 1, stall: 1, database: 1, kill_burn_before: 1, kill_burn_after: 1, kill_mint_before: 1, kill_mint_after: 1, kill_attestation: 1, rpc_stall: 1, attestation_down: 1, attestation_slow: 1 },
} satisfies Omit<LaneRunOptions<CctpFault>, 'seed'>;

/**
 * After-run plants: `double_burn_and_stray_mint` burns movement 0's amount to its recipient a second
 * time from the run's wallet (S1), and burns from another wallet, has it attested and mints it (a
 * mint no approved burn of the run accounts for: S2).
 */
export type CctpPlant = 'double_burn_and_stray_mint';

type Kill = 'kill_burn_before' | 'kill_burn_after' | 'kill_mint_before' | 'kill_mint_after' | 'kill_attestation';

/** The `to` of a JSON-RPC eth_sendRawTransaction, or null for any other request. */
function broadcastTo(r: ProxiedRequest): Address | null {
  try {
    const msg = JSON.parse(r.body) as { method?: string; params?: unknown[] };
    if (msg.method !== 'eth_sendRawTransaction' || typeof msg.params?.[0] !== 'string') return null;
    return (parseTransaction(msg.params[0] as Hex).to?.toLowerCase() as Address) ?? null;
  } catch {
    return null;
  }
}

export function cctpLane(w: CctpWorld): LaneDefinition<CctpFault> {
  return {
    name: 'cctp',
    faults: CCTP_FAULTS,
    env: {},
    async setup(pool: Pool, opts: LaneRunOptions<CctpFault>, workers: number): Promise<LaneInstance> {
      // A wallet of the run's own: its nonces start where this run's database says (nowhere).
      const hotKey = generatePrivateKey();
      const hot = privateKeyToAccount(hotKey).address.toLowerCase() as Address;
      for (const d of [w.source, w.destination]) await d.anvil.rpc('anvil_setBalance', [hot, '0xde0b6b3a7640000']);
      await sendCall(w.source.chain, w.source.rpcUrl, ANVIL_DEV_KEY, w.source.token, 'mint', [hot, 1_000_000_000n]);
      await sendCall(w.source.chain, w.source.rpcUrl, hotKey, w.source.token, 'approve', [w.source.messenger.address, maxUint256]);
      const fromBlock = { source: (await w.source.chain.getBlockNumber()) + 1n, destination: (await w.destination.chain.getBlockNumber()) + 1n };

      const proxies: { source: FaultProxy; destination: FaultProxy; iris: FaultProxy }[] = [];
      const configs: string[] = [];
      for (let i = 0; i < workers; i++) {
        const p = { source: await startFaultProxy(w.source.rpcUrl), destination: await startFaultProxy(w.destination.rpcUrl), iris: await startFaultProxy(w.iris.url) };
        proxies.push(p);
        configs.push(cctpConfigFile(w, { rpc: { source: p.source.url, destination: p.destination.url }, attestationUrl: p.iris.url }));
      }

      const movements: (RunMovement & { to: Address; units: bigint })[] = [];
      for (let m = 0; m < opts.movements; m++) {
        const to = freshAddress().toLowerCase() as Address;
        // Distinct amounts: a burn or a mint landing on the wrong movement would show.
        const units = BigInt(1_000_000 + m * 10_001 + (opts.seed % 1000));
        const amount = `${units / 1_000_000n}.${(units % 1_000_000n).toString().padStart(6, '0')}`;
        const template = cctpBridgeTemplate({ templateKey: `cctp-run-${opts.seed}-${m}`, sourceChainId: SOURCE_CHAIN_ID, destinationChainId: DESTINATION_CHAIN_ID, signerKey: 'hot' }) as unknown as TemplateDefinitionInput;
        const { movement } = await seedMovement(pool, template, { intent: { asset: 'USDC', amount, destination: { address: to } } });
        movements.push({ id: movement.id, to, units, describe: `bridge ${amount} USDC`, expect: { state: 'COMPLETED' } });
      }

      const armed: Record<Kill, number[]> = { kill_burn_before: [], kill_burn_after: [], kill_mint_before: [], kill_mint_after: [], kill_attestation: [] };
      let ctxRef: RunContext | null = null;
      const fire = (kind: Kill, worker: number, why: string): boolean => {
        const queue = armed[kind];
        if (!ctxRef || queue.length === 0) return false;
        if (!ctxRef.kill(worker, queue[0]!, why)) return false;
        queue.shift();
        ctxRef.faultInjected(kind);
        return true;
      };
      const messenger = w.source.messenger.address.toLowerCase();
      const transmitter = w.destination.transmitter.address.toLowerCase();
      proxies.forEach((p, i) => {
        p.source.onRequest = (r) => (broadcastTo(r) === messenger && fire('kill_burn_before', i, 'its burn broadcast is swallowed') ? 'hold' : 'pass');
        p.source.onAnswer = (r) => (broadcastTo(r) === messenger && fire('kill_burn_after', i, 'its burn is on chain, the answer held') ? 'hold' : 'pass');
        p.destination.onRequest = (r) => (broadcastTo(r) === transmitter && fire('kill_mint_before', i, 'its mint broadcast is swallowed') ? 'hold' : 'pass');
        p.destination.onAnswer = (r) => (broadcastTo(r) === transmitter && fire('kill_mint_after', i, 'its mint is on chain, the answer held') ? 'hold' : 'pass');
        p.iris.onAnswer = (r, answer) => (r.path.startsWith('/v2/messages/') && answer.body.includes('"status":"complete"') && fire('kill_attestation', i, 'its complete attestation is held') ? 'hold' : 'pass');
      });

      return {
        movements,
        env: (i) => ({ FERRY_CONFIG_FILE: configs[i]!, CCTP_HOT_KEY: hotKey }),
        inject(step, ctx) {
          ctxRef = ctx;
          const kind = step.kind as CctpFault;
          if (kind in armed) {
            armed[kind as Kill].push(step.ms);
            ctx.note(`armed: ${kind}`);
            return;
          }
          for (const p of proxies) {
            if (kind === 'rpc_stall') (p.source.stall(step.ms), p.destination.stall(step.ms));
            if (kind === 'attestation_down') p.iris.down(step.ms);
            if (kind === 'attestation_slow') p.iris.slow(step.ms, SLOW_BY_MS);
          }
          ctx.faultInjected(kind);
          ctx.note(`${kind}: ${CCTP_FAULTS[kind].describe(step)}`);
        },
        disarm() {
          for (const q of Object.values(armed)) q.length = 0;
        },
        ...(opts.plant === 'double_burn_and_stray_mint'
          ? {
              async plantAfter() {
                const burn = (key: Hex, to: Address, units: bigint) =>
                  write(w.source, key, w.source.messenger, 'depositForBurn', [units, DESTINATION_DOMAIN, pad(to), w.source.token.address, pad('0x'), 0n, 2000]);
                await burn(hotKey, movements[0]!.to, movements[0]!.units);
                const stray = await burn(w.hotKey, freshAddress().toLowerCase() as Address, 1_000_000n);
                const m = await waitFor('the stray burn to be attested', async () => {
                  const answer = (await (await fetch(`${w.iris.url}/v2/messages/${SOURCE_DOMAIN}?transactionHash=${stray}`)).json()) as { messages?: { message: Hex; attestation: Hex; status: string }[] };
                  return answer.messages?.find((x) => x.status === 'complete') ?? null;
                }, { timeoutMs: 30_000, everyMs: 250 });
                await write(w.destination, w.hotKey, w.destination.transmitter, 'receiveMessage', [m.message, m.attestation]);
              },
            }
          : {}),
        async check(rows) {
          const violations: string[] = [];
          // eth_getLogs refuses a range that starts past the head: a chain nothing was sent to holds nothing of the run's.
          const [sourceHead, destinationHead] = [await w.source.chain.getBlockNumber(), await w.destination.chain.getBlockNumber()];
          const source = { fromBlock: fromBlock.source, toBlock: 'latest' as const };
          const destination = { fromBlock: fromBlock.destination, toBlock: 'latest' as const };
          const on = async <T>(head: bigint, from: bigint, read: () => Promise<T>): Promise<T> => (from > head ? ([] as T) : read());
          const burns = (await on(sourceHead, source.fromBlock, () => w.source.chain.getContractEvents({ address: w.source.messenger.address, abi: w.source.messenger.abi, eventName: 'DepositForBurn', ...source }))) as unknown as {
            transactionHash: Hex;
            args: { amount: bigint; depositor: Address; mintRecipient: Hex; maxFee: bigint };
          }[];
          const sent = await on(sourceHead, source.fromBlock, () => w.source.chain.getContractEvents({ address: w.source.transmitter.address, abi: messageTransmitterAbi, eventName: 'MessageSent', ...source }));
          const mints = (await on(destinationHead, destination.fromBlock, () => w.destination.chain.getContractEvents({ address: w.destination.messenger.address, abi: w.destination.messenger.abi, eventName: 'MintAndWithdraw', ...destination }))) as unknown as {
            transactionHash: Hex;
            args: { mintRecipient: Address; amount: bigint };
          }[];
          const received = (await on(destinationHead, destination.fromBlock, () => w.destination.chain.getContractEvents({ address: w.destination.transmitter.address, abi: w.destination.transmitter.abi, eventName: 'MessageReceived', ...destination }))) as unknown as {
            transactionHash: Hex;
            args: { nonce: Hex };
          }[];
          // The attester's nonce of each message sent (test/emulators/attestation.ts): the burn it attests.
          const burnOfNonce = new Map(sent.map((l) => [keccak256(encodeAbiParameters([{ type: 'uint32' }, { type: 'bytes32' }, { type: 'uint256' }], [w.source.domain, l.transactionHash, BigInt(l.logIndex)])), l.transactionHash]));
          const ours = burns.filter((b) => b.args.depositor.toLowerCase() === hot);
          const recipientOf = (word: Hex) => `0x${word.slice(-40)}`.toLowerCase();
          const approvedBurns = new Set<string>();
          for (const [i, r] of rows.entries()) {
            const m = movements[i]!;
            const name = `movement ${i} (${m.describe}, ${m.id})`;
            const burned = ours.filter((b) => recipientOf(b.args.mintRecipient) === m.to);
            const minted = mints.filter((x) => x.args.mintRecipient.toLowerCase() === m.to);
            for (const b of burned) approvedBurns.add(b.transactionHash);
            if (burned.length > 1) violations.push(`S1: ${name}: ${burned.length} burns on chain ${SOURCE_CHAIN_ID}: ${burned.map((b) => b.transactionHash).join(', ')}`);
            if (minted.length > 1) violations.push(`S1: ${name}: ${minted.length} mints on chain ${DESTINATION_CHAIN_ID}: ${minted.map((x) => x.transactionHash).join(', ')}`);
            if (minted.length > burned.length) violations.push(`S2: ${name}: ${minted.length} mints for ${burned.length} burns`);
            if (r.state === 'COMPLETED') {
              if (burned.length === 0 || minted.length === 0) violations.push(`S4: ${name} is COMPLETED with ${burned.length} burns and ${minted.length} mints on chain`);
              const burn = burned[0];
              if (burn && burned.length === 1) {
                if (burn.args.amount !== m.units) violations.push(`S3: ${name}: burned ${burn.args.amount} base units, approved ${m.units}`);
                if (burn.args.maxFee !== 0n) violations.push(`S3: ${name}: the burn allows a fee of ${burn.args.maxFee}, approved 0`);
                if (r.byKey.burn?.provider_refs?.tx_hash !== burn.transactionHash) violations.push(`S3: ${name}: node burn records ${String(r.byKey.burn?.provider_refs?.tx_hash)}, the chain burned by ${burn.transactionHash}`);
              }
              const mint = minted[0];
              if (mint && minted.length === 1) {
                if (mint.args.amount !== m.units) violations.push(`S3: ${name}: minted ${mint.args.amount} base units, approved ${m.units}`);
                if (r.byKey.mint?.provider_refs?.tx_hash !== mint.transactionHash) violations.push(`S3: ${name}: node mint records ${String(r.byKey.mint?.provider_refs?.tx_hash)}, the chain minted by ${mint.transactionHash}`);
              }
              const held = await tokenBalance(w.destination.chain, w.destination.token, m.to);
              if (held !== m.units) violations.push(`S3: ${name}: the recipient holds ${held} base units on chain ${DESTINATION_CHAIN_ID}, approved ${m.units}`);
            } else if (burned.length > 0 || minted.length > 0) {
              violations.push(`S4: ${name} ended ${r.state} with ${burned.length} burns and ${minted.length} mints on chain`);
            }
          }
          const stray = ours.filter((b) => !approvedBurns.has(b.transactionHash));
          if (stray.length > 0) violations.push(`S1: ${stray.length} burn(s) from the run's wallet no movement accounts for: ${stray.map((b) => b.transactionHash).join(', ')}`);
          for (const x of received) {
            const burn = burnOfNonce.get(x.args.nonce);
            if (!burn || !approvedBurns.has(burn)) violations.push(`S2: message ${x.args.nonce} was received (minted) on chain ${DESTINATION_CHAIN_ID} by ${x.transactionHash} without an approved burn of this run`);
          }
          return { violations, effects: { burns: ours.length, mints: mints.length } };
        },
        async stop() {
          for (const p of proxies) for (const x of [p.source, p.destination, p.iris]) await x.stop();
        },
      };
    },
  };
}
