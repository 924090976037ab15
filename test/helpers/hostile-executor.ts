import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { encodeFunctionData, erc20Abi, serializeTransaction, type Address, type Hex, type TransactionSerializable } from 'viem';
import type { WorkerDeps } from '../../src/actors/execution.ts';
import { ConfigFileSchema } from '../../src/config-file.ts';
import { ERC20_TRANSFER_EXECUTOR } from '../../src/executors/evm/expected-effect.ts';
import { payloadHash } from '../../src/executors/payload-hash.ts';
import type { ExecutionContext, PreparedAction, Signer, SignRequest } from '../../src/executors/protocol.ts';
import { ExecutorRegistry, SignerRegistry } from '../../src/executors/registry.ts';
import { RemoteExecutorProxy } from '../../src/executors/remote-proxy.ts';
import { replacementLimitsOf } from '../../src/executors/signers/evm-policy.ts';
import { LocalPrivateKeySignerEvm } from '../../src/executors/signers/local-private-key-evm.ts';
import type { Pool } from '../../src/persistence/db.ts';
import type { TemplateDefinitionInput } from '../../src/plan/template-schema.ts';
import { ANVIL_CHAIN_ID, ANVIL_DEV_ADDRESS, ANVIL_DEV_KEY } from './anvil.ts';
import type { UsdcChain } from './contracts.ts';
import { listenOnLoopback, type Listening } from './net.ts';
import { plan, runtimeDeps } from './runtime.ts';

/**
 * A hostile remote executor for the signing tests: a loopback server speaking the executor
 * protocol (as `ferry executor-host` does) for an ERC-20 transfer of `amount` base units to
 * `recipient` on a real chain. /prepare builds the honest transaction (then `prepare` may rewrite
 * it), /submit broadcasts whatever signed bytes it is given, /observe answers OBSERVING and, with
 * `observe`, proposes a "replacement" made from the original.
 */

export const USDC_AMOUNT = 100_000_000n; // 100 USDC
export const transferData = (to: Address, amount: bigint) => encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [to, amount] });

export type FeeTx = TransactionSerializable & { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint };
/** What /observe proposes, from the original transaction and the number of the look (1, 2...). */
export type Variant = (original: FeeTx, look: number) => TransactionSerializable;

export interface HostileExecutor {
  url: string;
  /** Transaction hashes /submit broadcast, and the errors of those the chain refused. */
  broadcasts: string[];
  refusedBroadcasts: string[];
  prepares: () => number;
  stop(): Promise<void>;
}

export async function hostileExecutor(
  local: UsdcChain,
  recipient: Address,
  opts: { observe?: Variant; prepare?: (honest: FeeTx) => TransactionSerializable; amount?: bigint } = {},
): Promise<HostileExecutor> {
  let original: FeeTx | null = null;
  let looks = 0;
  let prepares = 0;
  const broadcasts: string[] = [];
  const refusedBroadcasts: string[] = [];
  const prepared = (ctx: ExecutionContext, tx: TransactionSerializable, id: string): PreparedAction => {
    const payload = serializeTransaction(tx as never);
    return { prepared_action_id: id, action_type: ctx.action_type, payload_format: 'evm_raw_tx', payload, payload_hash: payloadHash(payload), signing_required: true, provider_hints: {}, expires_at: null };
  };
  const handle = async (path: string, body: Record<string, unknown>): Promise<[number, unknown]> => {
    switch (path) {
      case '/preflight':
        return [204, undefined];
      case '/prepare': {
        prepares++;
        const ctx = body as unknown as ExecutionContext;
        const fees = await local.chain.estimateFeesPerGas();
        const nonce = await local.chain.getTransactionCount({ address: ANVIL_DEV_ADDRESS, blockTag: 'pending' });
        original = {
          type: 'eip1559',
          chainId: ANVIL_CHAIN_ID,
          nonce,
          to: local.usdc.address,
          value: 0n,
          data: transferData(recipient, opts.amount ?? USDC_AMOUNT),
          gas: 100_000n,
          maxFeePerGas: fees.maxFeePerGas,
          maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        };
        return [200, { next_state: 'SUBMITTING', prepared_action: prepared(ctx, opts.prepare ? opts.prepare(original) : original, 'hostile-v1') }];
      }
      case '/submit': {
        const signed = (body.sign_result as { signature: Hex }).signature;
        try {
          broadcasts.push(await local.chain.request({ method: 'eth_sendRawTransaction', params: [signed] }));
          return [200, { next_state: 'SUBMITTED', provider_refs: { tx_hash: broadcasts.at(-1) } }];
        } catch (err) {
          refusedBroadcasts.push((err as Error).message.split('\n')[0]!);
          return [200, { next_state: 'FAILED', error_code: 'BROADCAST_REFUSED' }];
        }
      }
      case '/observe': {
        looks++;
        const ctx = body as unknown as ExecutionContext;
        const proposal = opts.observe ? { prepared_action: prepared(ctx, opts.observe(original!, looks), `hostile-look-${looks}`) } : {};
        return [200, { next_state: 'OBSERVING', provider_state: 'pending', ...proposal }];
      }
      case '/recover':
        return [200, { next_state: 'OBSERVING' }];
      default:
        return [404, { error: 'no such endpoint' }];
    }
  };
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const [status, answer] = await handle(req.url ?? '', text ? (JSON.parse(text) as Record<string, unknown>) : {});
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(answer === undefined ? '' : JSON.stringify(answer));
  });
  const listening: Listening = await listenOnLoopback(server);
  return { url: listening.url, broadcasts, refusedBroadcasts, prepares: () => prepares, stop: () => listening.stop() };
}

/**
 * Runtime deps with the hostile executor bound as the ERC-20 executor (or `executorKey`), a local
 * signer that counts its requests, `evm` as the configuration file's evm section (default: the chain
 * with its RPC and `capWei`, and the token), and `file`'s other sections.
 */
export function hostileDeps(
  pool: Pool,
  local: UsdcChain,
  url: string,
  opts: { env?: Record<string, string>; capWei?: bigint; evm?: Record<string, unknown>; executorKey?: string; lane?: string; file?: Record<string, unknown> } = {},
): WorkerDeps & { signRequests: SignRequest[] } {
  const base = runtimeDeps(pool, opts.env);
  const executors = new ExecutorRegistry();
  executors.register(new RemoteExecutorProxy({ executorKey: opts.executorKey ?? ERC20_TRANSFER_EXECUTOR, baseUrl: url, timeoutMs: 10_000, lane: opts.lane ?? 'evm' }));
  const key = new LocalPrivateKeySignerEvm({ signerKey: 'evm_local', privateKey: ANVIL_DEV_KEY, replacements: replacementLimitsOf(base.config) });
  const signRequests: SignRequest[] = [];
  const counting: Signer = { signerKey: key.signerKey, sign: (req) => (signRequests.push(req), key.sign(req)) };
  const signers = new SignerRegistry();
  signers.register(counting);
  const file = ConfigFileSchema.parse({
    ...opts.file,
    evm: opts.evm ?? {
      chains: [{ chain_id: ANVIL_CHAIN_ID, rpc_url: local.anvil.url, max_fee_per_gas_cap_wei: (opts.capWei ?? 500_000_000_000n).toString() }],
      tokens: [{ chain_id: ANVIL_CHAIN_ID, symbol: 'USDC', address: local.usdc.address, decimals: 6 }],
    },
  });
  return { ...base, config: { ...base.config, file }, executors, signers, signRequests };
}

/** One node, `pay`: 100 USDC (the intent's amount) by the ERC-20 executor, signed by evm_local. */
export const usdcPlan = (key: string): TemplateDefinitionInput =>
  plan(key, [
    {
      node_key: 'pay',
      node_kind: 'action',
      action_type: 'evm_erc20_transfer',
      executor_binding: { executor_key: ERC20_TRANSFER_EXECUTOR },
      signer_binding: { signer_key: 'evm_local', chain_id: ANVIL_CHAIN_ID },
      config: { token: 'USDC', decimals: 6 },
    },
  ]);
