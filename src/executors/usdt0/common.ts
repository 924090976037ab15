export const USDT0_LANE = 'usdt0';
export const USDT0_SEND_KEY = 'exec.usdt0.send';
export const USDT0_CREDIT_KEY = 'exec.observe.usdt0_credit';
