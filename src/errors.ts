/**
 * Ferry's error vocabulary. Every error a caller can see carries a stable code; the HTTP status for
 * each code is decided here and nowhere else.
 */

export const errorStatus = {
  VALIDATION_FAILED: 400,
  MALFORMED_JSON: 400,
  BAD_REQUEST: 400,
  INVALID_TEMPLATE: 422,
  /** An intent its template's intent schema (or a node's fixed token) does not accept; details.field and details.rule say which. */
  INTENT_INVALID: 422,
  /** A JSON number that cannot be kept exactly (an integer beyond 2^53-1, more digits than a double holds). */
  INEXACT_NUMBER: 422,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  FOUR_EYES_VIOLATION: 403,
  NOT_MOVEMENT_OWNER: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  REQUEST_TIMEOUT: 408,
  INVALID_TRANSITION: 409,
  TRANSITION_CONFLICT: 409,
  LEASE_LOST: 409,
  STALE_PLAN_HASH: 409,
  IDEMPOTENCY_KEY_REUSED: 409,
  ALREADY_APPROVED: 409,
  APPROVAL_EXPIRED: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  /** Too many failed authentications from the caller's address (FERRY_AUTH_FAILURE_LIMIT); Retry-After says when to try again. */
  AUTH_THROTTLED: 429,
  /** A token already holds as many open event streams as FERRY_STREAM_MAX_PER_TOKEN allows. */
  TOO_MANY_STREAMS: 429,
  CALLBACK_HOST_NOT_ALLOWED: 422,
  CALLBACK_ADDRESS_NOT_ALLOWED: 422,
  CALLBACK_NOT_REDRIVABLE: 409,
  // Registered callback destinations (src/services/callback-destinations.ts)
  CALLBACK_DESTINATION_EXISTS: 409,
  CALLBACK_DESTINATION_DISABLED: 409,
  CALLBACK_DESTINATION_UNKNOWN: 422,
  // Operator channels made through the API (src/services/operator-channels.ts)
  /** Another operator channel (made through the API, or configured in FERRY_NOTIFY_CHANNELS: details.source) has this name. */
  OPERATOR_CHANNEL_EXISTS: 409,
  /** The channel is configured in FERRY_NOTIFY_CHANNELS: it is changed there, not through the API. */
  OPERATOR_CHANNEL_READ_ONLY: 409,
  SNAPSHOT_INCOMPATIBLE: 409,
  // An operator's cancel of a movement with nodes in flight (src/services/movement-cancel.ts, docs/operations.md "Cancelling").
  /** A node's attempt is between claim and provider (PREPARING, AWAITING_SIGNATURE, SUBMITTING) or UNKNOWN: nothing can be asked of its lane yet. */
  CANCEL_NODE_IN_DISPATCH: 409,
  /** No in-flight node's lane offers a cancel; details.nodes names them. Nothing changed. */
  CANCEL_NOT_SUPPORTED: 409,
  /** Every lane asked answered no (too late, not cancellable); the answers are recorded on the nodes, which go on. */
  CANCEL_REFUSED: 409,
  INTERNAL: 500,
  SERVICE_UNAVAILABLE: 503,
  DATABASE_UNAVAILABLE: 503,
  // A statement ran past FERRY_API_STATEMENT_TIMEOUT_MS and the server cancelled it.
  DATABASE_TIMEOUT: 503,
  MIGRATIONS_PENDING: 503,
  UPSTREAM_TIMEOUT: 504,

  // Template proposals (src/services/template-proposals.ts, docs/operations.md "Template proposals").
  /** The proposal is no longer in a state that takes this action (it was finalized, challenged, ...). */
  PROPOSAL_STATE_CONFLICT: 409,
  /** The template already has an open (PROPOSED or APPROVED) proposal with another graph. */
  PROPOSAL_ALREADY_OPEN: 409,
  /** Approve after the review window: the proposal is about to expire. */
  REVIEW_WINDOW_CLOSED: 409,
  /** Challenge after the challenge window: the proposal is being finalized. */
  CHALLENGE_WINDOW_CLOSED: 409,
  /** Finalize before the challenge window ended. */
  CHALLENGE_WINDOW_OPEN: 409,
  /** Only the proposer withdraws a proposal. */
  NOT_PROPOSER: 403,

  // Treasury policy (src/services/policy.ts, docs/policy.md). details.rule_id and
  // details.rule_set_version name the rule; details.limit_id the velocity limit.
  /** A block rule of the live rule set matches the movement. */
  POLICY_BLOCKED: 422,
  /** The live rule set has no rule that matches the movement: nothing allows it. */
  POLICY_NO_MATCHING_RULE: 422,
  /** The movement would take an asset's sum over a velocity limit's window past its maximum. */
  VELOCITY_LIMIT_EXCEEDED: 422,
  /**
   * The rule that would decide bounds an amount in a reference currency, and the asset's price cannot
   * be used (details.price_code: PRICE_STALE, PRICE_NOT_POSITIVE, PRICE_ROUND_INCOMPLETE,
   * PRICE_FEED_NOT_CONFIGURED, PRICE_UNREADABLE): refused, never allowed (fail closed).
   */
  POLICY_PRICE_UNAVAILABLE: 422,
  /** The matching rule counts approvals only from named principals, and the approver is not one. */
  POLICY_APPROVER_NOT_ELIGIBLE: 403,
  /** A rule set or book entry whose parts contradict each other or the book (details.problems). */
  POLICY_INVALID: 422,
  /** At dispatch: the live rule set requires more approvals than the movement was approved with (never an HTTP answer: a node's error code). */
  POLICY_QUORUM_RAISED: 409,

  // Standing orders (src/services/standing-orders.ts, docs/policy.md "Standing orders").
  /** A standing order whose parts contradict each other or the book (details.problems). */
  STANDING_ORDER_INVALID: 422,
  /** Another standing order has this name. */
  STANDING_ORDER_EXISTS: 409,
  /** The standing order is not in a state that takes this action (paused, revoked, ...). */
  STANDING_ORDER_STATE_CONFLICT: 409,
  /** The standing order is past its expiry. */
  STANDING_ORDER_EXPIRED: 409,

  // Queued movement orders (src/queue/movement-queue.ts): never an HTTP answer, the reason of a
  // dead-lettered order.
  /** The order is not signed by a usable queue credential of the principal it names. */
  QUEUE_ORDER_UNAUTHENTICATED: 401,
  /** The order's issued_at lies outside the replay window around its job's creation. */
  QUEUE_ORDER_EXPIRED: 401,

  // Requests to `ferry signer-host` and `ferry executor-host` (src/executors/host-requests.ts): the
  // host's answer to a request Ferry did not sign, as the remote proxies read it back.
  /** A POST without Ferry's request signature headers. */
  HOST_REQUEST_UNSIGNED: 401,
  /** Signed by a key the host does not pin, for a signer or executor it does not serve, or the request is not what was signed. */
  HOST_REQUEST_SIGNATURE_INVALID: 401,
  /** The request's time lies outside the host's replay window (FERRY_HOST_REQUEST_MAX_AGE_SECONDS). */
  HOST_REQUEST_EXPIRED: 401,
  /** The request's nonce was already seen inside the replay window. */
  HOST_REQUEST_REPLAYED: 409,
  /** A signed sign request without the approval's evidence (attempt, approved plan hash). */
  HOST_REQUEST_EVIDENCE_MISSING: 422,
  /** The host remembers as many recent nonces as it may; temporary. */
  HOST_REQUEST_NONCE_MEMORY_FULL: 503,
} as const;

export type ErrorCode = keyof typeof errorStatus;

export class FerryError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, details: Record<string, unknown> = {}, options?: ErrorOptions) {
    super(message, options);
    this.name = 'FerryError';
    this.code = code;
    this.details = details;
  }

  get httpStatus(): number {
    return errorStatus[this.code];
  }

  toJSON() {
    return { error: { code: this.code, message: this.message, details: this.details } };
  }
}

/** An event the machine does not accept in the entity's current state. */
export class InvalidTransitionError extends FerryError {
  constructor(machine: string, entityId: string, state: string, eventType: string) {
    super('INVALID_TRANSITION', `${machine} ${entityId} in state ${state} does not accept ${eventType}`, {
      machine,
      entity_id: entityId,
      state,
      event: eventType,
    });
  }
}

/**
 * A write of a dispatch whose claim is no longer the node's: the node was released (recovery found
 * it idle past the grace) and claimed again under another lease token. The write is refused.
 */
export class LeaseLostError extends FerryError {
  constructor(entityId: string, state: string, eventType: string) {
    super('LEASE_LOST', `ferry.node ${entityId} in state ${state}: the dispatch that sent ${eventType} no longer holds its claim`, {
      machine: 'ferry.node',
      entity_id: entityId,
      state,
      event: eventType,
    });
  }
}

/** The row moved under us between read and write; the caller may retry. */
export class TransitionConflictError extends FerryError {
  constructor(machine: string, entityId: string) {
    super('TRANSITION_CONFLICT', `${machine} ${entityId} changed concurrently; retry`, {
      machine,
      entity_id: entityId,
      retriable: true,
    });
  }
}

export class NotFoundError extends FerryError {
  constructor(kind: string, id: string) {
    super('NOT_FOUND', `${kind} ${id} not found`, { kind, id });
  }
}

export class ValidationError extends FerryError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('VALIDATION_FAILED', message, details);
  }
}

/** A plan template that cannot compile; the message names the node and the rule. */
export class InvalidTemplateError extends FerryError {
  constructor(rule: string, message: string, details: Record<string, unknown> = {}) {
    super('INVALID_TEMPLATE', message, { rule, ...details });
  }
}

/**
 * An intent refused at creation: `field` names the intent field (dotted below it: destination.tag),
 * `rule` the rule it broke (required, unknown_field, type, format, decimals, min, max, positive,
 * allowed, checksum, zero_address, asset_binding_mismatch, ...).
 */
export class IntentInvalidError extends FerryError {
  constructor(field: string, rule: string, message: string, details: Record<string, unknown> = {}) {
    super('INTENT_INVALID', message, { field, rule, ...details });
  }
}

export class SnapshotIncompatibleError extends FerryError {
  constructor(machine: string, entityId: string, cause: unknown) {
    super('SNAPSHOT_INCOMPATIBLE', `${machine} ${entityId} has a stored state this machine version cannot load`, {
      machine,
      entity_id: entityId,
      cause: String(cause),
    });
  }
}

export function isFerryError(e: unknown): e is FerryError {
  return e instanceof FerryError;
}
