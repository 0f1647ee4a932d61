// A simulated scenario: what the camera sees at each step of an episode and the behaviour code that is
// "right" for it. The right code is a function of visible things (the target's name and kind, where it is, where
// it moves), so a policy that reads the frame and the name can learn it: rewards built on it carry real signal.
// Pure and keyed by (seed, scenario index): the same scenario is the same on every run.
import { pick, uniform } from "./random.js";

/** Targets the simulated robot is asked to reach; each has a fixed shape and colour in the frame. */
export const TARGETS = [
  { name: "red cube", kind: "square", colour: "#d62728" },
  { name: "blue ball", kind: "circle", colour: "#1f77b4" },
  { name: "green cone", kind: "triangle", colour: "#2ca02c" },
  { name: "yellow mug", kind: "square", colour: "#e6c229" },
  { name: "orange bottle", kind: "circle", colour: "#ff7f0e" },
  { name: "purple chair", kind: "triangle", colour: "#9467bd" },
  { name: "grey door", kind: "square", colour: "#7f7f7f" },
  { name: "pink box", kind: "circle", colour: "#e377c2" },
] as const;

export type Target = (typeof TARGETS)[number];
export type ShapeKind = Target["kind"];

const BACKGROUNDS = ["#f4efe6", "#dde8f0", "#e7f2e1", "#efe3ee", "#f2f2f2", "#e9e4d8"] as const;

export interface Scene {
  /** Normalised centre of the target (0..1 across the frame). */
  x: number;
  y: number;
  /** Normalised radius of the target. */
  size: number;
  /** Normalised centre of a distractor of another kind and colour. */
  distractor: { x: number; y: number; kind: ShapeKind; colour: string };
  background: string;
  target: Target;
}

export interface Scenario {
  index: number;
  target: Target;
  background: string;
  start: { x: number; y: number };
  velocity: { x: number; y: number };
  size: number;
  distractor: Scene["distractor"];
}

export function scenario(seed: number, index: number): Scenario {
  const key = ["scenario", index] as const;
  const target = pick(TARGETS, seed, ...key, "target");
  const others = TARGETS.filter((t) => t.name !== target.name);
  const distractorTarget = pick(others, seed, ...key, "distractor");
  return {
    index,
    target,
    background: pick(BACKGROUNDS, seed, ...key, "background"),
    start: { x: 0.15 + 0.7 * uniform(seed, ...key, "x"), y: 0.2 + 0.6 * uniform(seed, ...key, "y") },
    velocity: { x: 0.16 * (uniform(seed, ...key, "vx") - 0.5), y: 0.12 * (uniform(seed, ...key, "vy") - 0.5) },
    size: 0.05 + 0.05 * uniform(seed, ...key, "size"),
    distractor: {
      x: 0.1 + 0.8 * uniform(seed, ...key, "dx"),
      y: 0.1 + 0.8 * uniform(seed, ...key, "dy"),
      kind: distractorTarget.kind,
      colour: distractorTarget.colour,
    },
  };
}

/** The scene at a step: the target moves with constant velocity and bounces off the frame's inner margin. */
export function sceneAt(s: Scenario, step: number): Scene {
  return {
    x: bounce(s.start.x + s.velocity.x * step),
    y: bounce(s.start.y + s.velocity.y * step),
    size: s.size * (1 + 0.08 * step), // the robot approaches: the target grows
    distractor: s.distractor,
    background: s.background,
    target: s.target,
  };
}

/** The right code for a scene: one digit per dimension, each a visible feature quantised into `levels`. */
export function targetCode(s: Scenario, step: number, codeLength: number, levels: number): string {
  const scene = sceneAt(s, step);
  const targetIndex = TARGETS.findIndex((t) => t.name === s.target.name);
  const moving = (s.velocity.x >= 0 ? 1 : 0) + (s.velocity.y >= 0 ? 2 : 0);
  const features = [
    quantise(scene.x, levels), // steer: where the target is across the frame
    quantise(scene.y, levels), // pitch: where it is up/down
    targetIndex % levels, // which object was asked for
    moving % levels, // which way it drifts
    quantise(scene.size / 0.2, levels), // how close it is
  ];
  let code = "";
  for (let i = 0; i < codeLength; i++) {
    const base = features[i % features.length] ?? 0;
    code += String((base + Math.floor(i / features.length)) % levels);
  }
  return code;
}

function quantise(value: number, levels: number): number {
  return Math.min(levels - 1, Math.max(0, Math.floor(value * levels)));
}

function bounce(value: number): number {
  const lo = 0.1;
  const span = 0.8;
  const period = 2 * span;
  const t = (((value - lo) % period) + period) % period;
  return lo + (t <= span ? t : period - t);
}
