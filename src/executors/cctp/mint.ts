import { encodeFunctionData, isHex, parseEventLogs, zeroAddress, type Hex, type TransactionReceipt } from 'viem';
import { EvmContractCallExecutor, type ContractCall } from '../evm/contract-call.ts';
import { signedBytesOf } from '../evm/signed-tx.ts';
import type { Parsed } from '../evm/token-config.ts';
import { failed, manual, result, type ReceiptCheck } from '../evm/tx-lifecycle.ts';
import { TemporaryMovementError } from '../errors.ts';
import type { ExecutionContext, ExecutionResult } from '../protocol.ts';
import { CCTP_LANE, CCTP_MINT_KEY, cctpOf, type CctpChain } from './common.ts';
import { addressOfWord, attestationSigners, decodeMessage, messageTransmitterAbi, tokenMessengerAbi, type DecodedMessage } from './message.ts';

export type { EvmContractCallOptions as CctpMintOptions } from '../evm/contract-call.ts';

interface MintInput {
  cctp: CctpChain;
  message: Hex;
  attestation: Hex;
  decoded: DecodedMessage;
}

/**
 * `exec.cctp.mint`: `receiveMessage(message, attestation)` on the destination chain's
 * MessageTransmitterV2, from one hot wallet. Before anything is signed it checks what the chain
 * would check (destination domain, destination caller, attesters and their order, the nonce) so a
 * bad attestation fails with a code of its own and nothing is sent. A message whose nonce is
 * already used has been received (by this node's own transaction, or by anyone else): that is
 * done, never a reason for a second receiveMessage. The transaction's life is the EVM lane's shared
 * contract-call lifecycle (evm/contract-call.ts), but for recovery, which is the nonce's to decide.
 */
export class CctpMintExecutor extends EvmContractCallExecutor<MintInput> {
  readonly executorKey = CCTP_MINT_KEY;
  readonly lane = CCTP_LANE;

  protected async check(ctx: ExecutionContext): Promise<ExecutionResult | null> {
    const input = this.#input(ctx);
    if (!input.ok) return failed(input.code, input.detail);
    const { cctp, decoded } = input.value;
    const code = await this.tx.read('eth_getCode', () => this.chain.client.getCode({ address: cctp.messageTransmitter }));
    if (!code || code === '0x') return failed('CCTP_CONTRACT_MISSING', `${this.chain.label} has no MessageTransmitterV2 at ${cctp.messageTransmitter}`);
    if (decoded.destinationCaller !== zeroAddress && decoded.destinationCaller !== this.from) {
      return failed('CCTP_DESTINATION_CALLER_MISMATCH', `the message may only be received by ${decoded.destinationCaller}, the mint sends from ${this.from}`);
    }
    const signers = await this.#checkAttesters(input.value);
    if (signers) return signers;
    if (await this.#received(input.value)) {
      // Someone received it before this node started: the funds are minted, nothing to send.
      return result({ next_state: 'SKIPPED', error_code: 'CCTP_MESSAGE_ALREADY_RECEIVED', error_detail: `message nonce ${decoded.nonce} is already used on ${this.chain.label}` });
    }
    return null;
  }

  protected async call(ctx: ExecutionContext): Promise<Parsed<ContractCall>> {
    const input = this.#input(ctx);
    if (!input.ok) return input;
    const { cctp, message, attestation, decoded } = input.value;
    return {
      ok: true,
      value: {
        to: cctp.messageTransmitter,
        data: encodeFunctionData({ abi: messageTransmitterAbi, functionName: 'receiveMessage', args: [message, attestation] }),
        hints: {
          to: cctp.messageTransmitter.toLowerCase(),
          message_transmitter: cctp.messageTransmitter.toLowerCase(),
          destination_domain: cctp.domain,
          source_domain: decoded.sourceDomain,
          message_nonce: decoded.nonce,
          ...mintRefs(input.value),
        },
        reverts: async (detail) => {
          // Received meanwhile: the next dispatch's preflight sees the used nonce.
          if (await this.#received(input.value)) throw new TemporaryMovementError('CCTP_NONCE_USED', `message nonce ${decoded.nonce} was received meanwhile`, { retry_after_seconds: 1 });
          return failed('CCTP_MINT_WOULD_REVERT', `receiveMessage reverts: ${detail}`);
        },
      },
    };
  }

  protected pinned(ctx: ExecutionContext): Parsed<MintInput> {
    return this.#input(ctx);
  }

  protected receiptCheck(input: MintInput): ReceiptCheck {
    return receivedCheck(input);
  }

  /** Reverted because another transaction received the message first: minted all the same. */
  protected override async settle(r: ExecutionResult, input: MintInput): Promise<ExecutionResult> {
    if (r.next_state === 'FAILED' && (await this.#received(input))) return this.#alreadyReceived(input, r);
    if (r.next_state === 'COMPLETED') return { ...r, provider_refs: { ...r.provider_refs, ...mintRefs(input) } };
    return r;
  }

  /**
   * The message's nonce decides first: used means received (by this attempt's transaction, whose
   * receipt is then reported, or by anyone else), so COMPLETED, and nothing is sent. Unused: the
   * stored signed bytes are looked up and, if the chain has no trace of them, sent again (the same
   * transaction); without them nothing was broadcast.
   */
  override async recover(ctx: ExecutionContext): Promise<ExecutionResult> {
    const input = this.#input(ctx);
    if (!input.ok) return manual(input.code, input.detail);
    const signed = signedBytesOf(ctx.attempt_artifacts) !== null;
    if (await this.#received(input.value)) {
      if (signed) {
        const txs = await this.tx.attemptTxs(ctx);
        if (txs.ok) {
          const own = await this.tx.status(txs.txs, this.finality(ctx), receivedCheck(input.value));
          if (own && (own.next_state === 'COMPLETED' || own.next_state === 'OBSERVING')) return own;
        }
      }
      return this.#alreadyReceived(input.value, null);
    }
    return signed ? this.tx.recover(ctx, this.finality(ctx), receivedCheck(input.value)) : this.tx.recoverUnsigned(ctx);
  }

  /** recover()'s questions, read only: the message's nonce, then the stored bytes looked up, never sent. */
  override async inspect(ctx: ExecutionContext): Promise<ExecutionResult> {
    const input = this.#input(ctx);
    if (!input.ok) return manual(input.code, input.detail);
    const signed = signedBytesOf(ctx.attempt_artifacts) !== null;
    if (await this.#received(input.value)) {
      if (signed) {
        const txs = await this.tx.attemptTxs(ctx);
        if (txs.ok) {
          const own = await this.tx.status(txs.txs, this.finality(ctx), receivedCheck(input.value));
          if (own && (own.next_state === 'COMPLETED' || own.next_state === 'OBSERVING')) return own;
        }
      }
      return this.#alreadyReceived(input.value, null);
    }
    return signed ? this.tx.inspect(ctx, this.finality(ctx), receivedCheck(input.value)) : this.tx.inspectUnsigned(ctx);
  }

  async #received(input: MintInput): Promise<boolean> {
    const used = await this.tx.read('usedNonces', () =>
      this.chain.client.readContract({ address: input.cctp.messageTransmitter, abi: messageTransmitterAbi, functionName: 'usedNonces', args: [input.decoded.nonce] }),
    );
    return used !== 0n;
  }

  #alreadyReceived(input: MintInput, own: ExecutionResult | null): ExecutionResult {
    return result({
      next_state: 'COMPLETED',
      provider_state: 'already_received',
      provider_refs: { ...(own?.provider_refs ?? {}), message_nonce: input.decoded.nonce, destination_domain: input.cctp.domain, ...mintRefs(input) },
      proof: { ...(own?.proof ?? {}), message_nonce: input.decoded.nonce, nonce_used: true },
      error_code: own ? 'CCTP_NONCE_USED' : null,
      error_detail: own ? `this attempt's transaction failed, but message nonce ${input.decoded.nonce} is used: the message was received by another transaction` : null,
    });
  }

  /** The attesters must be enabled on the destination transmitter, as many as its threshold, in ascending order. */
  async #checkAttesters(input: MintInput): Promise<ExecutionResult | null> {
    const signers = await attestationSigners(input.message, input.attestation);
    if (!signers) return failed('CCTP_ATTESTATION_INVALID', 'the attestation is not a list of 65-byte signatures over the message');
    const t = input.cctp.messageTransmitter;
    const threshold = await this.tx.read('signatureThreshold', () => this.chain.client.readContract({ address: t, abi: messageTransmitterAbi, functionName: 'signatureThreshold' }));
    if (BigInt(signers.length) !== threshold) return failed('CCTP_ATTESTATION_INVALID', `the attestation carries ${signers.length} signatures, the transmitter needs ${threshold}`);
    for (let i = 1; i < signers.length; i++) {
      if (signers[i]! <= signers[i - 1]!) return failed('CCTP_ATTESTATION_INVALID', 'the attestation signatures are not in ascending signer order');
    }
    for (const s of signers) {
      const enabled = await this.tx.read('isEnabledAttester', () => this.chain.client.readContract({ address: t, abi: messageTransmitterAbi, functionName: 'isEnabledAttester', args: [s] }));
      if (!enabled) return failed('CCTP_ATTESTATION_SIGNER_MISMATCH', `the attestation is signed by ${s}, which is not an attester of ${this.chain.label}'s MessageTransmitterV2`);
    }
    return null;
  }

  #input(ctx: ExecutionContext): Parsed<MintInput> {
    const cctp = cctpOf(this.chain);
    if (!cctp.ok) return cctp;
    const message = ctx.node_config.message ?? ctx.provider_context.message;
    const attestation = ctx.node_config.attestation ?? ctx.provider_context.attestation;
    const decoded = decodeMessage(message);
    if (!decoded) return { ok: false, code: 'CCTP_MESSAGE_INVALID', detail: 'message is not a CCTP v2 message (hex, at least 148 bytes)' };
    if (typeof attestation !== 'string' || !isHex(attestation)) return { ok: false, code: 'CCTP_ATTESTATION_INVALID', detail: 'attestation is not hex' };
    if (decoded.destinationDomain !== cctp.value.domain) {
      return { ok: false, code: 'CCTP_DESTINATION_DOMAIN_MISMATCH', detail: `the message goes to domain ${decoded.destinationDomain}, ${this.chain.label} is domain ${cctp.value.domain}` };
    }
    return { ok: true, value: { cctp: cctp.value, message: (message as string).toLowerCase() as Hex, attestation: attestation.toLowerCase() as Hex, decoded } };
  }
}

/**
 * What a received burn message mints, from the attested message itself (whoever received it): the
 * destination's TokenMessengerV2 mints amount - feeExecuted to the recipient and feeExecuted to its
 * fee recipient, and refuses a fee above the burn's max fee.
 */
function mintRefs(input: MintInput): Record<string, unknown> {
  const b = input.decoded.burn;
  if (!b) return {};
  return {
    mint_recipient: b.mintRecipient,
    amount_base_units: b.amount.toString(),
    max_fee_base_units: b.maxFee.toString(),
    fee_executed_base_units: b.feeExecuted.toString(),
    amount_received_base_units: (b.amount - b.feeExecuted).toString(),
  };
}

/** A successful receipt must carry MessageReceived for this nonce from the transmitter. */
function receivedCheck(input: MintInput): ReceiptCheck {
  return (receipt: TransactionReceipt, proof: Record<string, unknown>) => {
    const logs = parseEventLogs({ abi: messageTransmitterAbi, eventName: 'MessageReceived', logs: receipt.logs, strict: true }).filter(
      (l) => l.address.toLowerCase() === input.cctp.messageTransmitter.toLowerCase() && l.args.nonce.toLowerCase() === input.decoded.nonce.toLowerCase(),
    );
    if (logs.length > 0) {
      proof.message_nonce = input.decoded.nonce;
      proof.message_received_log_index = logs[0]!.logIndex;
      // The message's recipient is the destination TokenMessengerV2: its MintAndWithdraw says what was minted.
      const messenger = addressOfWord(input.decoded.recipient);
      const minted = parseEventLogs({ abi: tokenMessengerAbi, eventName: 'MintAndWithdraw', logs: receipt.logs, strict: true }).find((l) => l.address.toLowerCase() === messenger);
      if (minted) {
        proof.amount_minted_base_units = minted.args.amount.toString();
        proof.fee_collected_base_units = minted.args.feeCollected.toString();
      }
      return null;
    }
    return result({
      next_state: 'UNKNOWN',
      provider_state: 'mined_without_receive',
      provider_refs: { tx_hash: proof.tx_hash },
      proof,
      error_code: 'CCTP_RECEIVE_EVENT_MISSING',
      error_detail: `transaction ${String(proof.tx_hash)} succeeded without MessageReceived for nonce ${input.decoded.nonce}`,
      manual_intervention_required: true,
    });
  };
}
