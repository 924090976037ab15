export const GATEWAY_LANE = 'gateway';
export const GATEWAY_APPROVE_KEY = 'exec.gateway.approve';
export const GATEWAY_DEPOSIT_KEY = 'exec.gateway.deposit';
export const GATEWAY_INTENT_KEY = 'exec.gateway.intent';
export const GATEWAY_MINT_KEY = 'exec.gateway.mint';
export const GATEWAY_DEPOSIT_OBSERVE_KEY = 'exec.observe.gateway_deposit';
export const GATEWAY_BURN_OBSERVE_KEY = 'exec.observe.gateway_burn';
