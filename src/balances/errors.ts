import {
  BaseError,
  ContractFunctionRevertedError,
  ContractFunctionZeroDataError,
  HttpRequestError,
  RpcRequestError,
  TimeoutError,
} from 'viem';

/**
 * Why a balance could not be fetched, as a stable code. Only the code is kept and logged: the
 * errors themselves (viem's especially) carry the RPC URL in their text, and RPC URLs may hold an
 * API key.
 */
export type BalanceErrorCode =
  | 'RPC_UNREACHABLE'
  | 'RPC_TIMEOUT'
  | 'RPC_HTTP_ERROR'
  | 'RPC_ERROR'
  | 'CHAIN_MISMATCH'
  | 'CONTRACT_CALL_FAILED'
  | 'TOKEN_DECIMALS_MISMATCH'
  | 'SIM_SCRIPTED_FAILURE'
  | 'GATEWAY_API_UNAVAILABLE'
  | 'GATEWAY_API_REFUSED'
  | 'GATEWAY_ANSWER_INVALID'
  | 'FETCHER_NOT_REGISTERED'
  | 'FETCH_FAILED';

/** Failures that say the chain's endpoint, not one balance, is unusable: the rest of the chain is skipped for this run. */
export const CHAIN_WIDE_ERRORS: ReadonlySet<BalanceErrorCode> = new Set(['RPC_UNREACHABLE', 'RPC_TIMEOUT', 'RPC_HTTP_ERROR', 'CHAIN_MISMATCH', 'GATEWAY_API_UNAVAILABLE']);

/** A failure a fetcher names itself. Its message is Ferry's own words, never an upstream error's text. */
export class BalanceFetchError extends Error {
  constructor(
    readonly code: BalanceErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'BalanceFetchError';
  }
}

export function balanceErrorCode(err: unknown): BalanceErrorCode {
  if (err instanceof BalanceFetchError) return err.code;
  if (err instanceof BaseError) {
    if (err.walk((e) => e instanceof TimeoutError)) return 'RPC_TIMEOUT';
    if (err.walk((e) => e instanceof ContractFunctionRevertedError || e instanceof ContractFunctionZeroDataError)) return 'CONTRACT_CALL_FAILED';
    const http = err.walk((e) => e instanceof HttpRequestError) as HttpRequestError | null;
    if (http) return http.status ? 'RPC_HTTP_ERROR' : 'RPC_UNREACHABLE';
    if (err.walk((e) => e instanceof RpcRequestError)) return 'RPC_ERROR';
    if (err.name === 'ContractFunctionExecutionError') return 'CONTRACT_CALL_FAILED';
  }
  return 'FETCH_FAILED';
}
