export const HYPERLIQUID_LANE = 'hyperliquid';
export const HYPERLIQUID_TOPUP_KEY = 'exec.hyperliquid.topup';
export const HYPERLIQUID_CREDIT_KEY = 'exec.observe.hyperliquid_credit';
