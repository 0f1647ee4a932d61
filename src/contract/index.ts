// rlloop's wire contract: every schema that crosses a process (rollouts, the daemon's events, manifests, the stats
// record and its codec, the state record, the trainer job) and the NATS names. The package's public entry point
// for TypeScript rollout workers and monitors (`import { RolloutCompleted, publishRollout } from "rlloop/contract"`).
export * from "./enums.js";
export * from "./events.js";
export * from "./job.js";
export * from "./lease.js";
export * from "./manifest.js";
export * from "./names.js";
export * from "./outcomes.js";
export * from "./primitives.js";
export * from "./publish-rollout.js";
export * from "./rollout.js";
export * from "./service-requests.js";
export * from "./state.js";
export * from "./stats.js";
export * from "./stats-codec.js";
