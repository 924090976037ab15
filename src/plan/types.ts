import type { IntentSchema } from './intent-schema.ts';
import type { ExecutorBinding, JsonObject, NodeKind, SignerBinding } from './template-schema.ts';

/** What a node of a plan is, as a template version and a compiled plan both hold it (planNodeFields). */
export interface PlanNodeFields {
  node_key: string;
  node_kind: NodeKind;
  action_type: string;
  executor_binding: ExecutorBinding;
  signer_binding: SignerBinding | null;
  config: JsonObject;
  timeout_policy: JsonObject;
  retryable: boolean;
}

/** One node of a saved template version (a plan_nodes row plus the retryable flag of its definition). */
export interface TemplateVersionNode extends PlanNodeFields {
  plan_node_id: string;
  /** Index in the version's topological order. */
  position: number;
}

/** A saved, immutable template version: what a request is compiled from. */
export interface TemplateVersionRecord {
  id: string;
  template_id: string;
  template_key: string;
  version: number;
  graph_hash: string;
  risk_controls: JsonObject;
  /** What an intent of this version may hold; absent or null when the template declares no schema. */
  intent_schema?: IntentSchema | null;
  created_by: string;
  created_at: Date;
  /** Ordered by position. */
  nodes: TemplateVersionNode[];
  /** Ordered by from, then to. */
  edges: Array<{ from: string; to: string }>;
}

export interface CompiledNode extends PlanNodeFields {
  plan_node_id: string;
  /** Direct predecessors, sorted. */
  predecessors: string[];
  /** Direct successors, sorted. */
  successors: string[];
}

/** A template version bound to one request's intent: the plan the request executes. */
export interface CompiledPlan {
  template_key: string;
  template_version: number;
  template_version_id: string;
  graph_hash: string;
  risk_controls: JsonObject;
  /** Topological order (Kahn, ties broken by node key). */
  nodes: CompiledNode[];
  /** Nodes without predecessors, sorted: the ones that become READY on approval. */
  initial_frontier: string[];
  compiled_plan_hash: string;
}
