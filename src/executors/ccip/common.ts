export const CCIP_LANE = 'ccip';
export const CCIP_SEND_KEY = 'exec.ccip.send';
export const CCIP_DELIVERY_KEY = 'exec.observe.ccip_delivery';
export const CCIP_FEE_APPROVAL_KEY = 'exec.ccip.fee_approval';
