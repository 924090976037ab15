import type { Exchange } from 'ccxt';
import type { CexAccount } from './client.ts';
import { compareDecimal, decimalOf, isMultipleOf, sameDecimal } from './decimal.ts';

/**
 * Which network of a coin a withdrawal goes out on, and whether the exchange would receive exactly
 * the approved amount there.
 *
 * ccxt (4.5.84) reads withdraw()'s `params.network` as its own *unified* network code (BEP20,
 * ERC20, TRC20, OP), sends the exchange's id for it (BSC, ETH, TRX, OPTIMISM), and rounds the amount
 * with `currencyToPrecision(coin, amount, <that string>)`, which looks the string up among the
 * currency's networks, keyed by unified code. Given an exchange id there (BSC) it finds nothing
 * and silently truncates to the coarsest step of any network of the coin. So the network is
 * resolved here against ccxt's own loaded currency data (`currencies[coin].networks`, built by
 * ccxt from capital/config/getall) and handed to ccxt as the unified code ccxt itself keyed it by;
 * no table of our own that could disagree with ccxt's.
 */

/** One network of a coin as ccxt parsed it from the exchange. */
export interface CoinNetwork {
  /** ccxt's unified code: the key of `currencies[coin].networks`, what withdraw() must be given. */
  code: string;
  /** The exchange's id (Binance's `network`), what goes on the wire. */
  id: string;
  withdrawEnabled: boolean | undefined;
  /** The withdraw step (Binance's withdrawIntegerMultiple) as a decimal string. */
  step: string | undefined;
  min: string | undefined;
  max: string | undefined;
  fee: string | undefined;
  isDefault: boolean;
}

export type Refusal = { ok: false; code: string; detail: string; details: Record<string, unknown> };
export type Resolved = { ok: true; network: CoinNetwork } | Refusal;

interface CcxtNetwork {
  id?: string;
  withdraw?: boolean;
  precision?: number;
  fee?: number;
  limits?: { withdraw?: { min?: number; max?: number } };
  info?: Record<string, unknown>;
}

function networksOf(ex: Exchange, coin: string): CoinNetwork[] {
  const raw = (ex.currencies[coin]?.networks ?? {}) as Record<string, CcxtNetwork>;
  return Object.entries(raw).map(([code, n]) => {
    const info = n.info ?? {};
    return {
      code,
      id: String(n.id ?? code),
      withdrawEnabled: n.withdraw,
      step: stepOf(n, info),
      // The exchange's own strings first (exact), ccxt's parsed numbers otherwise.
      min: decimalOf(info.withdrawMin) ?? decimalOf(n.limits?.withdraw?.min),
      max: decimalOf(info.withdrawMax) ?? decimalOf(n.limits?.withdraw?.max),
      fee: decimalOf(info.withdrawFee) ?? decimalOf(n.fee),
      isDefault: info.isDefault === true,
    };
  });
}

/**
 * The withdraw step ccxt rounds with: its parsed `precision` (withdrawIntegerMultiple, else
 * withdrawInternalMin, a zero taken as none), as the exchange's exact text when that is the same
 * number. None when ccxt has none (then only ccxt's own currencyToPrecision result is compared).
 */
function stepOf(n: CcxtNetwork, info: Record<string, unknown>): string | undefined {
  if (typeof n.precision !== 'number' || !(n.precision > 0)) return undefined;
  for (const key of ['withdrawIntegerMultiple', 'withdrawInternalMin']) {
    const text = decimalOf(info[key]);
    if (text !== undefined && Number(text) === n.precision) return text;
  }
  return decimalOf(n.precision);
}

const listed = (nets: CoinNetwork[]) => nets.map((n) => `${n.code} (id ${n.id})`).join(', ') || 'none';

/**
 * The network a node names. `name` is the node's network (config.network or intent.network); the
 * account's `networks` maps it to a value that is either the exchange's network id (BSC) or ccxt's
 * unified code (BEP20); an unmapped name is taken as such a value itself. Without a name: the
 * coin's only network, else the one the exchange marks as default, named explicitly so that ccxt
 * rounds with that network's step and not the coarsest one.
 *
 * A value matches a network of the coin when it is its unified code or its id, or when ccxt's own
 * alias rules (networkCodeToId / networkIdToCode: ETH for ERC20 on tokens, BSC for BEP20, ...)
 * turn it into one of them. It must match exactly one network; ccxt must then turn that network's
 * code back into the same id it will send. The names can only be checked against the exchange's
 * networks once ccxt has loaded them (the first call of a node that uses them): a value that names
 * no network of the coin fails that node, naming the entry.
 */
export function resolveNetwork(ex: Exchange, account: CexAccount, coin: string, name: string | null, opts: { direct?: boolean } = {}): Resolved {
  const nets = networksOf(ex, coin);
  const refuse = (code: string, detail: string, details: Record<string, unknown> = {}): Refusal => ({
    ok: false,
    code,
    detail,
    details: { account: account.key, coin, ...details },
  });
  if (!name) {
    const chosen = nets.length === 1 ? nets : nets.filter((n) => n.isDefault);
    if (chosen.length !== 1) return refuse('CEX_NETWORK_MISSING', `${coin} on ${account.key} has ${nets.length} networks (${listed(nets)}) and no single default: name one (config.network)`);
    return check(chosen[0]!);
  }
  // direct: `name` is already an id or code (a prepared request's), not a name to map.
  const mapped = opts.direct ? undefined : account.networks[name];
  const value = mapped ?? name;
  const what = mapped !== undefined ? `cex.accounts ${account.key} networks.${name} (${value})` : `network ${name}`;
  const viaCode = ex.networkCodeToId(value, coin);
  const viaId = ex.networkIdToCode(value, coin);
  const matches = nets.filter((n) => n.code === value || n.id === value || n.id === viaCode || n.code === viaId);
  if (matches.length === 0) {
    return refuse('CEX_NETWORK_UNKNOWN', `${what} is no network of ${coin} on ${account.key}, which lists ${listed(nets)}; give the exchange's network id or ccxt's network code`, { network: value });
  }
  if (matches.length > 1) {
    return refuse('CEX_NETWORK_AMBIGUOUS', `${what} matches several networks of ${coin} on ${account.key}: ${listed(matches)}; give the exchange's network id`, { network: value });
  }
  return check(matches[0]!);

  function check(n: CoinNetwork): Resolved {
    const wire = ex.networkCodeToId(n.code, coin);
    if (wire !== n.id) {
      return refuse('CEX_NETWORK_MISMATCH', `ccxt would send network id ${wire} for ${coin} ${n.code}, the exchange lists ${n.id}`, { network: n.id, network_code: n.code, would_send_network: wire });
    }
    return { ok: true, network: n };
  }
}

/**
 * Whether the exchange would receive `amount` unchanged on `network`: withdrawals enabled there, the
 * amount what ccxt's own rounding for that network (currencyToPrecision, the code ccxt's withdraw()
 * runs) leaves it, a whole multiple of the network's step, and within its min/max. A refusal names
 * the network, its step, the approved amount and what would have been sent.
 */
export function checkWithdrawal(ex: Exchange, account: CexAccount, coin: string, network: CoinNetwork, amount: string): Refusal | null {
  const base = { account: account.key, coin, network: network.id, network_code: network.code, approved: amount };
  const refuse = (code: string, detail: string, details: Record<string, unknown> = {}): Refusal => ({ ok: false, code, detail, details: { ...base, ...details } });
  const on = `${coin} on ${network.code} (id ${network.id}) at ${account.key}`;
  if (network.withdrawEnabled === false) return refuse('CEX_WITHDRAW_DISABLED', `withdrawals of ${on} are disabled`);
  const wouldSend = String(ex.currencyToPrecision(coin, amount as unknown as number, network.code));
  if (!sameDecimal(wouldSend, amount) || (network.step !== undefined && !isMultipleOf(amount, network.step))) {
    return refuse(
      'CEX_AMOUNT_PRECISION',
      `the approved ${amount} is not a multiple of the withdraw step ${network.step ?? 'unknown'} of ${on}: ccxt would send ${wouldSend}; nothing was sent`,
      { precision: network.step ?? null, would_send: wouldSend },
    );
  }
  if (network.min !== undefined && compareDecimal(amount, network.min) === -1) {
    return refuse('CEX_AMOUNT_BELOW_MINIMUM', `${amount} is below the minimum withdrawal ${network.min} of ${on}`, { min: network.min });
  }
  if (network.max !== undefined && compareDecimal(network.max, '0') === 1 && compareDecimal(amount, network.max) === 1) {
    return refuse('CEX_AMOUNT_ABOVE_MAXIMUM', `${amount} is above the maximum withdrawal ${network.max} of ${on}`, { max: network.max });
  }
  return null;
}
