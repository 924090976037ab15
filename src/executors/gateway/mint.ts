import { encodeFunctionData, isHex, parseEventLogs, zeroAddress, type Address, type Hex, type TransactionReceipt } from 'viem';
import { EvmContractCallExecutor, type ContractCall, type EvmContractCallOptions } from '../evm/contract-call.ts';
import { signedBytesOf } from '../evm/signed-tx.ts';
import { failed, manual, result, type ReceiptCheck } from '../evm/tx-lifecycle.ts';
import { TemporaryMovementError } from '../errors.ts';
import type { ExecutionContext, ExecutionResult } from '../protocol.ts';
import { addressOfWord, decodeAttestation, gatewayMinterAbi, word, type TransferSpec } from './codec.ts';
import { GATEWAY_LANE, GATEWAY_MINT_KEY } from './common.ts';
import type { GatewayChain, GatewayConfig } from './config.ts';
import type { Parsed } from './spec.ts';

export interface GatewayMintOptions extends EvmContractCallOptions {
  gateway: GatewayConfig;
}

interface MintInput {
  entry: GatewayChain;
  attestation: Hex;
  signature: Hex;
  spec: TransferSpec;
  specHash: Hex;
  maxBlockHeight: bigint;
  recipient: Address;
}

/** Destination blocks searched back for an AttestationUsed of the spec hash (a mint by anyone). */
export const MINT_LOOKBACK_BLOCKS = 50_000n;

/**
 * `exec.gateway.mint`: `gatewayMint(attestation, signature)` on the destination chain's
 * GatewayMinter, from one hot wallet, with what the Gateway API answered the burn intent (the
 * preceding intent node's provider_refs, or config.attestation and config.attestation_signature).
 * Before anything is signed it checks what the minter would: the attestation is for this domain
 * and this minter, its destination caller is anyone or this wallet, it has not expired, and its
 * transfer spec hash has no AttestationUsed yet (used: minted already, by this wallet or anyone,
 * so SKIPPED, never a second mint). The transaction's life is the EVM lane's contract-call
 * lifecycle; recovery asks the minter's events first.
 */
export class GatewayMintExecutor extends EvmContractCallExecutor<MintInput> {
  readonly executorKey = GATEWAY_MINT_KEY;
  readonly lane = GATEWAY_LANE;
  readonly #gateway: GatewayConfig;

  constructor(opts: GatewayMintOptions) {
    super(opts);
    this.#gateway = opts.gateway;
  }

  protected async check(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const input = this.#input(ctx);
    if (!input.ok) return failed(input.code, input.detail);
    const v = input.value;
    const code = await this.tx.read('eth_getCode', () => this.chain.client.getCode({ address: v.entry.minter as Address }));
    if (!code || code === '0x') return failed('GATEWAY_CONTRACT_MISSING', `${this.chain.label} has no GatewayMinter at ${v.entry.minter}`);
    const caller = addressOfWord(v.spec.destinationCaller);
    if (caller !== zeroAddress && caller !== this.from) return failed('GATEWAY_DESTINATION_CALLER_MISMATCH', `the attestation may only be minted by ${caller}, the mint sends from ${this.from}`);
    const head = await this.tx.read('eth_blockNumber', () => this.chain.client.getBlockNumber());
    if (v.maxBlockHeight < head) return failed('GATEWAY_ATTESTATION_EXPIRED', `the attestation was valid up to block ${v.maxBlockHeight} of ${this.chain.label}, now at ${head}`);
    if (await this.#minted(v)) {
      return result({ next_state: 'SKIPPED', provider_state: 'already_minted', provider_refs: mintRefs(v), error_code: 'GATEWAY_ALREADY_MINTED', error_detail: `transfer spec ${v.specHash} is already minted on ${this.chain.label}` });
    }
    return null;
  }

  protected async call(ctx: ExecutionContext): Promise<Parsed<ContractCall>> {
    const input = this.#input(ctx);
    if (!input.ok) return input;
    const v = input.value;
    return {
      ok: true,
      value: {
        to: v.entry.minter as Address,
        data: encodeFunctionData({ abi: gatewayMinterAbi, functionName: 'gatewayMint', args: [v.attestation, v.signature] }),
        hints: { to: v.entry.minter.toLowerCase(), minter: v.entry.minter.toLowerCase(), ...mintRefs(v) },
        reverts: async (detail) => {
          if (await this.#minted(v)) throw new TemporaryMovementError('GATEWAY_ALREADY_MINTED', `transfer spec ${v.specHash} was minted meanwhile`, { retry_after_seconds: 1 });
          return failed('GATEWAY_MINT_WOULD_REVERT', `gatewayMint reverts: ${detail}`);
        },
      },
    };
  }

  protected pinned(ctx: ExecutionContext): Parsed<MintInput> {
    return this.#input(ctx);
  }

  protected receiptCheck(v: MintInput): ReceiptCheck {
    return usedCheck(v);
  }

  protected override async settle(r: ExecutionResult, v: MintInput): Promise<ExecutionResult> {
    if (r.next_state === 'FAILED' && (await this.#minted(v))) return this.#alreadyMinted(v, r);
    if (r.next_state === 'COMPLETED') return { ...r, provider_refs: { ...r.provider_refs, ...mintRefs(v) } };
    return r;
  }

  /** The minter's events decide first: an AttestationUsed of the spec hash means minted (by this attempt's transaction, reported, or by anyone); else the stored signed bytes, sent again if the chain lost them. */
  override async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.#resolveUncertain(ctx, false);
  }

  override async inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    return this.#resolveUncertain(ctx, true);
  }

  async #resolveUncertain(ctx: ExecutionContext, readOnly: boolean): Promise<ExecutionResult> {
    const input = this.#input(ctx);
    if (!input.ok) return manual(input.code, input.detail);
    const v = input.value;
    const signed = signedBytesOf(ctx.attempt_artifacts) !== null;
    if (await this.#minted(v)) {
      if (signed) {
        const txs = await this.tx.attemptTxs(ctx);
        if (txs.ok) {
          const own = await this.tx.status(txs.txs, this.finality(ctx), usedCheck(v));
          if (own && (own.next_state === 'COMPLETED' || own.next_state === 'OBSERVING')) return { ...own, provider_refs: { ...own.provider_refs, ...mintRefs(v) } };
        }
      }
      return this.#alreadyMinted(v, null);
    }
    if (readOnly) return signed ? this.tx.inspect(ctx, this.finality(ctx), usedCheck(v)) : this.tx.inspectUnsigned(ctx);
    return signed ? this.tx.recover(ctx, this.finality(ctx), usedCheck(v)) : this.tx.recoverUnsigned(ctx);
  }

  async #minted(v: MintInput): Promise<boolean> {
    const head = await this.tx.read('eth_blockNumber', () => this.chain.client.getBlockNumber());
    const step = BigInt(this.#gateway.log_block_range);
    const start = head > MINT_LOOKBACK_BLOCKS ? head - MINT_LOOKBACK_BLOCKS : 0n;
    for (let from = start; from <= head; from += step) {
      const to = from + step - 1n < head ? from + step - 1n : head;
      const logs = await this.tx.read('eth_getLogs', () =>
        this.chain.client.getContractEvents({ address: v.entry.minter as Address, abi: gatewayMinterAbi, eventName: 'AttestationUsed', args: { transferSpecHash: v.specHash }, fromBlock: from, toBlock: to, strict: true }),
      );
      if (logs.length > 0) return true;
    }
    return false;
  }

  #alreadyMinted(v: MintInput, own: ExecutionResult | null): ExecutionResult {
    return result({
      next_state: 'COMPLETED',
      provider_state: 'already_minted',
      provider_refs: { ...(own?.provider_refs ?? {}), ...mintRefs(v) },
      proof: { ...(own?.proof ?? {}), transfer_spec_hash: v.specHash, attestation_used: true },
      error_code: own ? 'GATEWAY_ALREADY_MINTED' : null,
      error_detail: own ? `this attempt's transaction failed, but transfer spec ${v.specHash} is minted: another transaction minted it` : null,
    });
  }

  #input(ctx: ExecutionContext): Parsed<MintInput> {
    const entry = this.#gateway.chains.find((c) => c.chain_id === this.chain.chainId);
    if (!entry) return { ok: false, code: 'GATEWAY_CHAIN_NOT_CONFIGURED', detail: `${this.chain.label} has no gateway entry` };
    const attestation = ctx.node_config.attestation ?? ctx.provider_context.attestation;
    const signature = ctx.node_config.attestation_signature ?? ctx.provider_context.attestation_signature;
    const decoded = decodeAttestation(attestation);
    if (!decoded) return { ok: false, code: 'GATEWAY_ATTESTATION_INVALID', detail: 'attestation is not a Gateway attestation (config.attestation, or a preceding burn intent)' };
    if (typeof signature !== 'string' || !isHex(signature) || signature.length !== 132) return { ok: false, code: 'GATEWAY_ATTESTATION_INVALID', detail: 'attestation_signature is not a 65-byte signature' };
    const s = decoded.spec;
    if (s.destinationDomain !== entry.domain) return { ok: false, code: 'GATEWAY_DESTINATION_MISMATCH', detail: `the attestation goes to domain ${s.destinationDomain}, ${this.chain.label} is domain ${entry.domain}` };
    if (s.destinationContract !== word(entry.minter as Address)) return { ok: false, code: 'GATEWAY_DESTINATION_MISMATCH', detail: `the attestation is for the minter ${addressOfWord(s.destinationContract) ?? s.destinationContract}, the chain's is ${entry.minter}` };
    const recipient = addressOfWord(s.destinationRecipient);
    if (!recipient || !addressOfWord(s.destinationCaller)) return { ok: false, code: 'GATEWAY_ATTESTATION_INVALID', detail: 'the attestation names a recipient or caller that is not an address' };
    return { ok: true, value: { entry, attestation: (attestation as string).toLowerCase() as Hex, signature: signature.toLowerCase() as Hex, spec: s, specHash: decoded.specHash, maxBlockHeight: decoded.maxBlockHeight, recipient } };
  }
}

function mintRefs(v: MintInput): Record<string, unknown> {
  return {
    transfer_spec_hash: v.specHash,
    source_domain: v.spec.sourceDomain,
    destination_domain: v.spec.destinationDomain,
    recipient: v.recipient,
    amount_base_units: v.spec.value.toString(),
    source_depositor: addressOfWord(v.spec.sourceDepositor),
  };
}

/** A successful receipt carries the minter's AttestationUsed of the spec hash. */
function usedCheck(v: MintInput): ReceiptCheck {
  return (receipt: TransactionReceipt, proof: Record<string, unknown>) => {
    const logs = parseEventLogs({ abi: gatewayMinterAbi, eventName: 'AttestationUsed', logs: receipt.logs, strict: true }).filter(
      (l) => l.address.toLowerCase() === v.entry.minter.toLowerCase() && l.args.transferSpecHash.toLowerCase() === v.specHash,
    );
    if (logs.length === 1) {
      proof.transfer_spec_hash = v.specHash;
      proof.attestation_used_log_index = logs[0]!.logIndex;
      proof.amount_minted_base_units = logs[0]!.args.value.toString();
      return null;
    }
    return result({
      next_state: 'UNKNOWN',
      provider_state: 'mined_without_attestation_used',
      provider_refs: { tx_hash: proof.tx_hash },
      proof,
      error_code: 'GATEWAY_MINT_EVENT_MISSING',
      error_detail: `transaction ${String(proof.tx_hash)} succeeded without AttestationUsed for ${v.specHash}`,
      manual_intervention_required: true,
    });
  };
}
