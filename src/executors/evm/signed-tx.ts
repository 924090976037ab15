import { isHex, keccak256, parseTransaction, recoverTransactionAddress, serializeTransaction, type Address, type Hex } from 'viem';
import type { GeneratedArtifact } from '../protocol.ts';

/**
 * The signed transaction of an attempt, as durable facts: the bytes the signer returned (stored as
 * the attempt's 'signature' artifact before submit() runs), their hash, sender and nonce. Every
 * later question (was it mined? is it pending? may it be sent again?) starts from these bytes, so
 * none depends on the memory of the process that broadcast them.
 */
export interface SignedTx {
  raw: Hex;
  hash: Hex;
  from: Address;
  nonce: number;
  chainId: number;
  /** An operator's cancel of the attempt (a zero-value self-transfer at its nonce), not a version of its payment. */
  cancel?: boolean;
}

export type SignedTxResult = { ok: true; tx: SignedTx } | { ok: false; detail: string };

export async function decodeSignedTx(raw: string): Promise<SignedTxResult> {
  if (!isHex(raw, { strict: true })) return { ok: false, detail: 'signed transaction is not 0x-prefixed hex' };
  try {
    const parsed = parseTransaction(raw);
    if (parsed.r === undefined || parsed.s === undefined) return { ok: false, detail: 'transaction is not signed' };
    if (parsed.nonce === undefined || parsed.chainId === undefined) return { ok: false, detail: 'signed transaction has no nonce or chain id' };
    const from = (await recoverTransactionAddress({ serializedTransaction: raw as never })).toLowerCase() as Address;
    return { ok: true, tx: { raw, hash: keccak256(raw), from, nonce: parsed.nonce, chainId: parsed.chainId } };
  } catch (err) {
    return { ok: false, detail: `signed transaction cannot be decoded: ${(err as Error).message.split('\n')[0]}` };
  }
}

/** True when `signed` is exactly `unsigned` plus a signature: the signer changed nothing. */
export function signsExactly(signed: Hex, unsigned: string): boolean {
  try {
    const { r: _r, s: _s, v: _v, yParity: _y, ...fields } = parseTransaction(signed) as Record<string, unknown>;
    return serializeTransaction(fields as never).toLowerCase() === unsigned.toLowerCase();
  } catch {
    return false;
  }
}

/** The attempt's signed bytes, from its artifacts (the newest 'signature' artifact). */
export function signedBytesOf(artifacts: readonly GeneratedArtifact[] | undefined): string | null {
  const sig = [...(artifacts ?? [])].reverse().find((a) => a.artifact_type === 'signature' && a.content_inline);
  return sig?.content_inline ?? null;
}

/** Every signed version of the attempt (a fee bump adds one), oldest first. */
export function signedVersionsOf(artifacts: readonly GeneratedArtifact[] | undefined): string[] {
  return (artifacts ?? []).filter((a) => a.artifact_type === 'signature' && a.content_inline).map((a) => a.content_inline!);
}

/** Every signed version of the attempt, oldest first, each marked when it is an operator's cancel (stored with `cancel: true`). */
export function signedEntriesOf(artifacts: readonly GeneratedArtifact[] | undefined): { raw: string; cancel: boolean }[] {
  return (artifacts ?? [])
    .filter((a) => a.artifact_type === 'signature' && a.content_inline)
    .map((a) => ({ raw: a.content_inline!, cancel: a.artifact_metadata?.cancel === true }));
}

/** The sender and nonce the attempt's prepared action reserved, from its 'prepared_action' artifact. */
export function preparedNonceOf(artifacts: readonly GeneratedArtifact[] | undefined): { from: Address; nonce: number } | null {
  const prepared = [...(artifacts ?? [])].reverse().find((a) => a.artifact_type === 'prepared_action' && a.content_inline);
  if (!prepared?.content_inline) return null;
  try {
    const hints = (JSON.parse(prepared.content_inline) as { provider_hints?: Record<string, unknown> }).provider_hints ?? {};
    const nonce = Number(hints.nonce);
    if (typeof hints.from !== 'string' || !Number.isSafeInteger(nonce) || nonce < 0) return null;
    return { from: hints.from as Address, nonce };
  } catch {
    return null;
  }
}
