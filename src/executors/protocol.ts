import { z } from 'zod';
import { nodeStates } from '../machines/node-machine.ts';
import { FatalMovementError } from './errors.ts';

/**
 * The executor and signer wire protocol. Field names are the reference protocol's snake_case, so a
 * remote executor or signer written against it speaks to Ferry unchanged. Objects strip fields they
 * do not know (a newer peer may send more) but are strict on the types of the fields they do know.
 */

export const PROTOCOL_VERSION = '1.0';

const jsonObject = z.record(z.string(), z.unknown());
const nullableString = z.string().nullable().default(null);

/**
 * What a single executor result may carry into Ferry's tables, logs and API answers. An executor
 * is a peer, possibly hostile (a remote executor host): its free text is cut to size, and a
 * structured field over its bound is refused, never cut (a cut provider reference would point at
 * nothing, and Ferry would observe the wrong thing). Both executors in this process and remote
 * ones pass through ExecutionResultSchema, so this is the one place the bounds hold.
 */
export const RESULT_BOUNDS = {
  /** error_detail: characters kept, the truncation marker included. */
  detailChars: 4096,
  /** error_code, provider_state: characters kept. */
  codeChars: 256,
  /** provider_refs, proof, provider_hints, artifact_metadata: serialized JSON, bytes. */
  jsonBytes: 16 * 1024,
  /** A generated artifact's content_inline, bytes. */
  inlineBytes: 64 * 1024,
  /** A prepared action's payload, bytes (an EVM node refuses transactions over 128 KiB anyway). */
  payloadBytes: 256 * 1024,
  /** Entries of artifacts and generated_artifacts. */
  artifacts: 32,
} as const;

/** Marks a zod issue as a bound exceeded, so a parser can tell it from a malformed answer. */
export const TOO_LARGE_ISSUE = 'executor_answer_too_large';

/**
 * Text safe to store: at most `max` characters, ending in a marker that says how long it was when
 * it was cut; NUL characters and unpaired surrogates (PostgreSQL refuses both) become U+FFFD.
 */
export function boundText(text: string, max: number): string {
  let s = storable(text);
  if (s.length <= max) return s;
  const marker = `… [truncated, ${text.length} characters]`;
  let cut = Math.max(0, max - marker.length);
  // Never split a surrogate pair: half of one is what PostgreSQL refuses.
  if (cut > 0 && /[\uD800-\uDBFF]/.test(s[cut - 1]!)) cut--;
  s = s.slice(0, cut) + marker;
  return s;
}

// NUL, a high surrogate not followed by a low one, a low one not preceded by a high one.
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const storable = (s: string) => s.replace(UNSTORABLE, '\uFFFD');

const byteLength = (s: string) => Buffer.byteLength(s, 'utf8');
// What a value takes as JSON; 0 for one JSON cannot hold (a bigint), which storing it refuses anyway.
const jsonBytes = (v: unknown) => {
  try {
    return byteLength(JSON.stringify(v) ?? '');
  } catch {
    return 0;
  }
};

const boundedText = (max: number) => z.string().transform((s) => boundText(s, max));
const boundedNullableText = (max: number) => boundedText(max).nullable().default(null);

/** A string refused over `maxBytes` (content that cannot be cut: payloads, inline artifacts). */
const cappedString = (maxBytes: number, what: string) =>
  z.string().check((ctx) => {
    if (byteLength(ctx.value) > maxBytes) {
      ctx.issues.push({ code: 'custom', input: ctx.value, message: `${what} is over ${maxBytes} bytes`, params: { [TOO_LARGE_ISSUE]: true } });
    }
  });

/** A JSON object refused when its serialization is over the bound; its strings made safe to store. */
const boundedJsonObject = (what: string) =>
  jsonObject
    .check((ctx) => {
      const size = jsonBytes(ctx.value);
      if (size > RESULT_BOUNDS.jsonBytes) {
        ctx.issues.push({ code: 'custom', input: ctx.value, message: `${what} is ${size} bytes of JSON, over ${RESULT_BOUNDS.jsonBytes}`, params: { [TOO_LARGE_ISSUE]: true } });
      }
    })
    .transform((v) => wellFormedJson(v) as Record<string, unknown>);

/** JSON whose strings (keys included) PostgreSQL can store: NUL and unpaired surrogates become U+FFFD. */
export function wellFormedJson(value: unknown): unknown {
  if (typeof value === 'string') return storable(value);
  if (Array.isArray(value)) return value.map(wellFormedJson);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [wellFormedJson(k) as string, wellFormedJson(v)]));
  }
  return value;
}

/** True when the answer was refused for size (a field over its bound), not for its shape. */
export function isTooLarge(error: z.ZodError): boolean {
  return error.issues.some((i) => i.code === 'custom' && (i.params as Record<string, unknown> | undefined)?.[TOO_LARGE_ISSUE] === true);
}
// Reference peers serialise datetimes as ISO 8601, with or without an offset.
const isoDateTime = z.iso.datetime({ offset: true, local: true });

export const ArtifactRefSchema = z.object({
  artifact_type: z.string().min(1),
  artifact_digest: z.string().min(1),
});
export type ArtifactRef = z.output<typeof ArtifactRefSchema>;

export const GeneratedArtifactSchema = z.object({
  artifact_type: z.string().min(1),
  content_format: z.string().min(1).default('json'),
  content_inline: nullableString,
  content_uri: nullableString,
  artifact_metadata: jsonObject.default({}),
  artifact_digest: nullableString,
});
export type GeneratedArtifact = z.output<typeof GeneratedArtifactSchema>;

export const PreparedActionSchema = z.object({
  prepared_action_id: z.string().min(1),
  action_type: z.string().min(1),
  payload_format: z.string().min(1),
  payload: cappedString(RESULT_BOUNDS.payloadBytes, 'prepared_action.payload').nullable().default(null),
  payload_hash: z.string().min(1),
  signing_required: z.boolean(),
  provider_hints: boundedJsonObject('prepared_action.provider_hints').default({}),
  expires_at: isoDateTime.nullable().default(null),
});
export type PreparedAction = z.output<typeof PreparedActionSchema>;
export type PreparedActionInput = z.input<typeof PreparedActionSchema>;

/** A generated artifact as an executor returns it: GeneratedArtifactSchema within RESULT_BOUNDS. */
const ResultArtifactSchema = GeneratedArtifactSchema.extend({
  artifact_type: boundedText(RESULT_BOUNDS.codeChars).pipe(z.string().min(1)),
  content_format: boundedText(RESULT_BOUNDS.codeChars).pipe(z.string().min(1)).default('json'),
  content_inline: cappedString(RESULT_BOUNDS.inlineBytes, 'generated_artifacts[].content_inline').nullable().default(null),
  content_uri: cappedString(RESULT_BOUNDS.codeChars * 8, 'generated_artifacts[].content_uri').nullable().default(null),
  artifact_metadata: boundedJsonObject('generated_artifacts[].artifact_metadata').default({}),
});

const boundedList = <T extends z.ZodType>(item: T, what: string) =>
  z.array(item).check((ctx) => {
    if (ctx.value.length > RESULT_BOUNDS.artifacts) {
      ctx.issues.push({ code: 'custom', input: ctx.value, message: `${what} has ${ctx.value.length} entries, over ${RESULT_BOUNDS.artifacts}`, params: { [TOO_LARGE_ISSUE]: true } });
    }
  });

export const ExecutionResultSchema = z.object({
  next_state: z.enum(nodeStates),
  provider_state: boundedNullableText(RESULT_BOUNDS.codeChars),
  provider_refs: boundedJsonObject('provider_refs').default({}),
  proof: boundedJsonObject('proof').default({}),
  error_code: boundedNullableText(RESULT_BOUNDS.codeChars),
  error_detail: boundedNullableText(RESULT_BOUNDS.detailChars),
  retry_after_seconds: z.number().int().nonnegative().nullable().default(null),
  manual_intervention_required: z.boolean().default(false),
  artifacts: boundedList(ArtifactRefSchema, 'artifacts').default([]),
  generated_artifacts: boundedList(ResultArtifactSchema, 'generated_artifacts').default([]),
  prepared_action: PreparedActionSchema.nullable().default(null),
});
export type ExecutionResult = z.output<typeof ExecutionResultSchema>;
/** What an executor may return: only next_state is required, the rest takes the protocol's defaults. */
export type ExecutionResultInput = z.input<typeof ExecutionResultSchema>;

// A binding object keeps its extra fields: they are the executor's own settings (exchange, mode...).
export const ExecutorBindingObjectSchema = z.looseObject({ executor_key: z.string().min(1) });
export const SignerBindingObjectSchema = z.looseObject({ signer_key: z.string().min(1) });

export const ResolvedBindingsSchema = z.object({
  executor: ExecutorBindingObjectSchema,
  signer: SignerBindingObjectSchema.nullable().default(null),
});
export type ResolvedBindings = z.output<typeof ResolvedBindingsSchema>;

export const PriorArtifactSchema = z.looseObject({
  artifact_type: z.string().min(1),
  artifact_digest: z.string().nullable(),
});

const evmAddress = z
  .string()
  .regex(/^0x[0-9a-fA-F]{40}$/, 'a 0x-prefixed 20-byte address')
  .transform((a) => a.toLowerCase());
const baseUnits = z.string().regex(/^[0-9]+$/, 'a whole number, as a decimal string');

/**
 * Ferry's addition: what the approved plan says a signing node may do, derived by the dispatcher
 * from the compiled plan, the intent and Ferry's configuration (never from the executor's output).
 * An EVM signer decodes the transaction it is asked to sign and refuses anything else.
 * - `asset` 'native': a value transfer of `amount_base_units` wei to `to`;
 * - `asset` a token address: that token's `transfer(to, amount)` (or `approve(to, amount)` when
 *   `token_method` says so), with no native value;
 * - `call`: a call of exactly that method (selector) on the contract `to`, carrying
 *   `amount_base_units` wei; only when the node's config names the contract and the method.
 */
export const ExpectedEffectSchema = z.object({
  chain_id: z.number().int().positive(),
  asset: z.union([z.literal('native'), evmAddress]),
  to: evmAddress,
  amount_base_units: baseUnits,
  max_fee_per_gas_cap_wei: baseUnits.optional(),
  token_method: z.enum(['transfer', 'approve', 'permit']).optional(),
  /**
   * The decimals amount_base_units was computed with and the token's symbol (evm.tokens), for a
   * token amount: pinned with the effect when the movement was created, so a configuration changed
   * since changes nothing that is signed (a change is refused at dispatch, effect_changed_since_approval).
   */
  token_decimals: z.number().int().min(0).max(36).optional(),
  token_symbol: z.string().min(1).max(64).optional(),
  call: z
    .object({
      method: z.string().min(1),
      selector: z.string().regex(/^0x[0-9a-f]{8}$/),
      /** The whole calldata, when the plan fixes every argument (the CCTP burn): compared byte for byte. */
      data: z.string().regex(/^0x([0-9a-f]{2})*$/).optional(),
    })
    .optional(),
  /**
   * A LayerZero OFT `send` (the USDT0 lane, usdt0/oft.ts): the SendParam the plan fixes, the cap of
   * the native fee (the value sent, equal to the fee the calldata declares) and the refund address
   * (unset: the sender). `to` is the OFT, `asset` the token it moves, `amount_base_units` the amount.
   */
  oft_send: z
    .object({
      dst_eid: z.number().int().positive(),
      to: z.string().regex(/^0x[0-9a-f]{64}$/),
      amount_ld: baseUnits,
      min_amount_ld: baseUnits,
      extra_options: z.string().regex(/^0x([0-9a-f]{2})*$/),
      compose_msg: z.string().regex(/^0x([0-9a-f]{2})*$/),
      oft_cmd: z.string().regex(/^0x([0-9a-f]{2})*$/),
      max_native_fee_wei: baseUnits,
      refund_address: evmAddress.optional(),
    })
    .optional(),
  /**
   * A Chainlink CCIP `ccipSend` (the CCIP lane, ccip/router.ts): the destination selector (and its
   * chain), the receiver (abi-encoded), the one token amount, the data, the extraArgs, the fee token
   * (native: the zero address) and the cap of the fee, which is the value sent (the Router keeps all
   * of it). `to` is the Router, `asset` the token, `amount_base_units` the amount.
   */
  ccip_send: z
    .object({
      dest_chain_selector: z.string().regex(/^[0-9]{1,20}$/),
      destination_chain_id: z.number().int().positive(),
      receiver: z.string().regex(/^0x[0-9a-f]{64}$/),
      token: evmAddress,
      amount: baseUnits,
      data: z.string().regex(/^0x([0-9a-f]{2})*$/),
      fee_token: evmAddress,
      extra_args: z.string().regex(/^0x([0-9a-f]{2})*$/),
      max_fee_wei: baseUnits,
    })
    .optional(),
  /**
   * A Circle Gateway burn intent (the Gateway lane, gateway/effect.ts): the TransferSpec the plan
   * fixes (domains and the destination's chain, GatewayWallet and GatewayMinter, tokens, recipient,
   * destination caller, value) and the cap of its maxFee, all in base units and lowercase
   * addresses. Signed as typed data (`typed_data`, primary type BurnIntent); `to` is the wallet,
   * `asset` the source token, `amount_base_units` the value.
   */
  gateway_burn: z
    .object({
      source_domain: z.number().int().min(0),
      destination_domain: z.number().int().min(0),
      destination_chain_id: z.number().int().positive(),
      source_contract: evmAddress,
      destination_contract: evmAddress,
      source_token: evmAddress,
      destination_token: evmAddress,
      destination_recipient: evmAddress,
      destination_caller: evmAddress,
      value: baseUnits,
      max_fee: baseUnits,
      /** How far past the source chain's head the intent's maxBlockHeight may be (gateway.intent_validity_blocks). */
      max_blocks_ahead: z.number().int().positive(),
    })
    .optional(),
  /**
   * Typed data (EIP-712) the plan approved instead of a transaction: the primary type, the exact
   * domain (every field it has, none other), how far ahead its deadline may be, and the nonce when
   * the plan pins one. With `token_method` 'permit': an EIP-2612 permit on the token `asset` for the
   * spender `to` of at most `amount_base_units` (signers/typed-data-policy.ts).
   */
  typed_data: z
    .object({
      primary_type: z.string().min(1).max(64),
      domain: z
        .object({
          name: z.string().max(256).optional(),
          version: z.string().max(64).optional(),
          chainId: z.number().int().positive().optional(),
          verifyingContract: evmAddress.optional(),
          salt: z.string().regex(/^0x[0-9a-f]{64}$/).optional(),
        })
        .strict(),
      deadline_max_seconds: z.number().int().positive().optional(),
      nonce: baseUnits.optional(),
    })
    .optional(),
});
export type ExpectedEffect = z.output<typeof ExpectedEffectSchema>;

export const ExecutionContextSchema = z.object({
  protocol_version: z.string().min(1),
  request_id: z.string().min(1),
  request_node_id: z.string().min(1),
  compiled_plan_hash: z.string().min(1),
  template_key: z.string().min(1),
  template_version: z.number().int().positive(),
  node_key: z.string().min(1),
  node_kind: z.string().min(1),
  action_type: z.string().min(1),
  attempt_no: z.number().int().positive(),
  intent: jsonObject,
  input_params: jsonObject,
  resolved_bindings: ResolvedBindingsSchema,
  risk_controls: jsonObject,
  prior_artifacts: z.array(PriorArtifactSchema),
  node_config: jsonObject,
  provider_context: jsonObject,
  timeout_policy: jsonObject,
  /** Ferry's addition: stable per attempt (`${request_node_id}:${attempt_no}`), for provider dedup. */
  idempotency_key: z.string().min(1).optional(),
  /**
   * Ferry's addition: what this node already recorded for the current attempt (its prepared action,
   * its signature, proofs), with content, so observe() and recover() can work from durable facts,
   * e.g. re-derive a transaction hash from the signed bytes, after the process that made them died.
   */
  attempt_artifacts: z.array(GeneratedArtifactSchema).optional(),
  /**
   * Ferry's addition: the node's expected effect as pinned when its movement was created (see
   * ExpectedEffectSchema), or why none could be derived; both absent for a node that has none
   * pinned (no signer binding, or created before pinning). The signer signs against it.
   */
  expected_effect: ExpectedEffectSchema.nullable().optional(),
  expected_effect_unavailable: z.string().nullable().optional(),
});
export type ExecutionContext = z.output<typeof ExecutionContextSchema>;

export const SigningIntentSchema = z.object({
  action: z.string(),
  asset: z.string(),
  amount: z.string(),
  destination: z.string(),
  max_fee_usd: nullableString,
  chain_family: z.string().min(1),
  allowed_payload_hash: z.string().min(1),
});
export type SigningIntent = z.output<typeof SigningIntentSchema>;


/**
 * Ferry's addition: what a replacement (a fee bump of a submitted transaction) replaces. The runtime
 * reads it from its own database (the attempt's first signed prepared action), never from the
 * executor that proposed the replacement; the signer refuses a replacement that differs from it in
 * anything but bounded, non-decreasing fees (evm-policy.ts checkReplacement).
 */
export const ReplacedVersionSchema = z.object({
  /** The original version's payload (for `evm_raw_tx`, the unsigned serialized transaction). */
  payload: z.string().min(1),
  payload_hash: z.string().min(1),
  /** 1 for the first replacement of the attempt, 2 for the second...; the signer bounds it. */
  replacement_no: z.number().int().positive(),
});
export type ReplacedVersion = z.output<typeof ReplacedVersionSchema>;

export const SignRequestSchema = z.object({
  protocol_version: z.string().min(1),
  request_id: z.string().min(1),
  request_node_id: z.string().min(1),
  signing_intent: SigningIntentSchema,
  payload_format: z.string().min(1),
  payload: z.string(),
  payload_hash: z.string().min(1),
  metadata: jsonObject.default({}),
  /**
   * Ferry's addition, the approval's evidence with request_id and request_node_id: the attempt the
   * payload is for and the hash of the plan the movement was approved with. A signer host requires
   * both (with Ferry's request signature over the whole request, src/executors/host-requests.ts).
   */
  attempt_no: z.number().int().positive().optional(),
  compiled_plan_hash: z.string().min(1).optional(),
  /** Ferry's addition: the executor the payload comes from; a signer serves only the executors it lists. */
  executor_key: z.string().min(1).optional(),
  /** Ferry's addition: see ExpectedEffectSchema. Absent or null: an EVM signer refuses (default deny). */
  expected_effect: ExpectedEffectSchema.nullable().optional(),
  /** Why no expected effect could be derived, for the refusal's message. */
  expected_effect_unavailable: z.string().nullable().optional(),
  /** Ferry's addition: set exactly when the payload replaces the attempt's original version (see ReplacedVersionSchema). */
  replaces: ReplacedVersionSchema.nullable().optional(),
  /**
   * Ferry's addition: set exactly when an operator's cancel asks for the payload, a zero-value
   * transfer from the sender to itself at the nonce of the attempt's original version (read by the
   * runtime from its own records, as for `replaces`). The signer signs that one shape and nothing
   * else under it (evm-policy.ts checkCancel).
   */
  cancels: ReplacedVersionSchema.nullable().optional(),
});
export type SignRequest = z.output<typeof SignRequestSchema>;

export const SignResultSchema = z.object({
  signature: z.string(),
  signature_format: z.string().min(1),
  signer_ref: z.string().min(1),
});
export type SignResult = z.output<typeof SignResultSchema>;

const probeCommon = {
  provider_state: boundedNullableText(RESULT_BOUNDS.codeChars),
  provider_refs: boundedJsonObject('provider_refs').default({}),
  proof: boundedJsonObject('proof').default({}),
  retry_after_seconds: z.number().int().nonnegative().nullable().default(null),
};

export const ChainReceiveProbeResultSchema = z.object({ matched: z.boolean(), ...probeCommon });
export type ChainReceiveProbeResult = z.output<typeof ChainReceiveProbeResultSchema>;

export const ChainFinalityProbeResultSchema = z.object({
  finalized: z.boolean(),
  confirmations: z.number().int().nonnegative(),
  ...probeCommon,
});
export type ChainFinalityProbeResult = z.output<typeof ChainFinalityProbeResultSchema>;

export const ProtocolProbeResultSchema = z.object({
  completed: z.boolean(),
  ...probeCommon,
  generated_artifacts: boundedList(ResultArtifactSchema, 'generated_artifacts').default([]),
});
export type ProtocolProbeResult = z.output<typeof ProtocolProbeResultSchema>;

/** Options the dispatcher passes to submit(); the signature exists only when signing was required. */
export interface SubmitOptions {
  signResult?: SignResult;
}

/**
 * One executor: the only code that touches a provider. submit() is where money moves; the node is
 * committed SUBMITTING with its attempt number and idempotency key before it is called.
 */
export interface Executor {
  readonly executorKey: string;
  /** Family of executors (sim, evm, cex, cctp, remote...), used for per-lane recovery and health. */
  readonly lane: string;
  /** null: every precondition holds. A result: its next_state (usually FAILED or SKIPPED) ends dispatch. */
  preflight(ctx: ExecutionContext): Promise<ExecutionResult | null>;
  /** Builds the action to submit, without any side effect; a result without prepared_action fails the node. */
  prepare(ctx: ExecutionContext): Promise<ExecutionResult>;
  submit(ctx: ExecutionContext, preparedAction: PreparedAction, opts: SubmitOptions): Promise<ExecutionResult>;
  observe(ctx: ExecutionContext): Promise<ExecutionResult>;
  /**
   * Resolves an uncertain attempt by asking the provider; never submits again, but may finish what
   * the attempt began (the EVM lane sends its stored signed bytes again, the same transaction, and
   * settles its nonce reservation). Only recovery calls it, for the UNKNOWN and stuck SUBMITTING
   * nodes of EXECUTING movements: the nodes no person owns.
   */
  recover(ctx: ExecutionContext): Promise<ExecutionResult>;
  /**
   * What the provider says about the attempt now, and nothing else: no broadcast, no order, no
   * change to a nonce reservation or any other state, in Ferry or at the provider. Reconciliation
   * asks it about settled nodes, those of a movement waiting for a person included. An attempt the
   * provider has no trace of yet (signed bytes never sent) is UNKNOWN, never READY unless nothing
   * of it can ever reach the provider.
   */
  inspect(ctx: ExecutionContext): Promise<ExecutionResult>;
  /** Absent: health is unknown. Throwing (or `{ ok: false }`): the executor is down. */
  health?(): Promise<Record<string, unknown> | null>;
  cancel?(ctx: ExecutionContext): Promise<ExecutionResult>;
  close?(): Promise<void>;
  /** Last gate before submit(); TemporaryMovementError defers the node, anything else fails it. */
  preSubmitCheck?(ctx: ExecutionContext, prepared?: PreparedAction): Promise<void>;
  /**
   * Checks that need the approved plan beyond this node (the CCTP burn's caller alignment with
   * its mint). Called before preflight; a result ends dispatch as a preflight result does.
   */
  checkPlan?(ctx: ExecutionContext, plan: unknown): Promise<ExecutionResult | null>;
}

export interface Signer {
  readonly signerKey: string;
  /** Must refuse (throw) when the request's payload does not match the hash the intent allows. */
  sign(req: SignRequest): Promise<SignResult>;
  health?(): Promise<Record<string, unknown> | null>;
  close?(): Promise<void>;
}

/**
 * Validates what an executor returned and fills the protocol's defaults.
 * @throws FatalMovementError (EXECUTOR_INVALID_RESULT) naming the offending fields.
 */
export function parseExecutionResult(value: unknown, source: string): ExecutionResult {
  const parsed = ExecutionResultSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  const code = isTooLarge(parsed.error) ? EXECUTOR_ANSWER_TOO_LARGE : 'EXECUTOR_INVALID_RESULT';
  throw new FatalMovementError(code, `${source} returned an invalid ExecutionResult: ${describeIssues(parsed.error)}`, {
    issues: parsed.error.issues.slice(0, MAX_ISSUES).map((i) => ({ path: i.path.join('.'), message: i.message })),
  });
}

/** The code of an executor answer refused for its size: over the transport limit, or a field over RESULT_BOUNDS. */
export const EXECUTOR_ANSWER_TOO_LARGE = 'EXECUTOR_ANSWER_TOO_LARGE';

// An answer with a million bad entries must not make a million-line error message.
const MAX_ISSUES = 10;

/** One line naming each invalid field (the first few), for error messages. */
export function describeIssues(error: z.ZodError): string {
  const shown = error.issues.slice(0, MAX_ISSUES).map((i) => `${i.path.slice(0, 8).join('.') || '(root)'}: ${i.message.slice(0, 200)}`);
  const more = error.issues.length - shown.length;
  return shown.join('; ') + (more > 0 ? `; and ${more} more` : '');
}
