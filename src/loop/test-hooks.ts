// Test-only pause points for the crash tests (and setPauseHook, for tests that run the daemon in their own
// process). With RLLOOP_TEST_PAUSE_AT=<phase> or <phase>:<round>, the daemon logs {"testPause": phase, "round": n}
// when it reaches that point and then waits forever, so a test can SIGKILL it at exactly that point. Unset (always,
// in production) it is a no-op. Phases:
//   intake      the open round holds its second rollout (frames written to incoming/, nothing acked)
//   assembling  frames moved and train.jsonl written, manifest not yet written
//   training    the trainer finished (adapter in adapter.tmp-*), nothing gated or committed
//   committed   the state record moved in KV, no message acked yet
//   publishing  the adapter files are in the object store, not yet announced
//   announced   the adapter is announced, its round.published lifecycle event not yet
//   isolated    rollouts taken out of a trained round: its new manifest written, train.jsonl not yet rebuilt (a
//               round with no rollout taken out never reaches it)
//   attempt     a training attempt finished, before anything judges it (the log-prob outliers, the gate)
import type { Logger } from "pino";

/** The points every round passes. */
export const PAUSE_PHASES = ["intake", "assembling", "training", "committed", "publishing", "announced"] as const;
export type PausePhase = (typeof PAUSE_PHASES)[number] | "isolated" | "attempt";

let fired = false;
let hook: ((phase: PausePhase, round: number) => void | Promise<void>) | null = null;

/** An in-process test's own action at every pause point (filling a disk at one exact step); null, always, in production. */
export function setPauseHook(action: typeof hook): void {
  hook = action;
}

export async function pausePoint(phase: PausePhase, round: number, log: Logger): Promise<void> {
  await hook?.(phase, round);
  const spec = process.env.RLLOOP_TEST_PAUSE_AT;
  if (!spec || fired) return;
  const [wantPhase, wantRound] = spec.split(":");
  if (wantPhase !== phase || (wantRound !== undefined && Number(wantRound) !== round)) return;
  fired = true;
  log.warn({ testPause: phase, round }, "RLLOOP_TEST_PAUSE_AT reached; waiting to be killed");
  await new Promise<never>(() => {});
}
