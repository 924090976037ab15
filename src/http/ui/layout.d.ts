// Types of layout.js for the tests that import it (the page loads the JavaScript itself).
export const CHAR_EM: number;
export const FONT: { state: number; label: number; dagKey: number; dagState: number };
export const LINE: number;
export const M: Record<'h' | 'padX' | 'minW' | 'gapY' | 'minGap' | 'pad' | 'loop' | 'margin' | 'lane' | 'laneStep', number>;
export const DAG: Record<'h' | 'padX' | 'minW' | 'gapX' | 'gapY' | 'pad', number>;

export interface Box { x: number; y: number; w: number; h: number }
export interface LabelBox extends Box { lines: string[] }
export interface MachineViewLike {
  initial: string | null;
  states: Array<{ key: string; final: boolean }>;
  graph: { edges: Array<{ source: string; target: string; event: string }> };
}
export interface LaidPair {
  id: string;
  source: string;
  target: string;
  events: string[];
  kind: 'forward' | 'loop' | 'within' | 'back';
  d: string;
  label: LabelBox;
}
export interface MachineLayout {
  layers: string[][];
  pos: Map<string, Box & { layer: number }>;
  pairs: LaidPair[];
  width: number;
  height: number;
}

export function textWidth(text: string, size: number): number;
export function countCrossings(layers: string[][], edges: Array<{ source: string; target: string }>): number;
export function orderLayers(layers: string[][], edges: Array<{ source: string; target: string }>, sweeps?: number): string[][];
export function machineLayers(view: MachineViewLike): string[][];
export function layoutMachine(view: MachineViewLike): MachineLayout;

export interface PlanLike {
  nodes: Array<{ key: string; layer: number } & Record<string, unknown>>;
  edges: Array<{ from: string; to: string }>;
}
export function layoutPlan<P extends PlanLike>(plan: P, lines: (node: P['nodes'][number]) => string[]): { layers: string[][]; pos: Map<string, Box>; width: number; height: number };
