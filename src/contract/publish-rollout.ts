// A typed publisher for TypeScript rollout workers: validates a rollout against the contract (under the daemon's
// default limits) and publishes it on its policy's subject with the message id set, so a retried publish is
// stored once (the stream's duplicate window) and the daemon's duplicate-id memory sees the same id.
import type { JetStreamClient, PubAck } from "@nats-io/jetstream";
import { subjects } from "./names.js";
import { RolloutCompleted, type RolloutCompletedInput } from "./rollout.js";

export class InvalidRolloutError extends Error {
  override name = "InvalidRolloutError";
}

/** Publishes one rollout; throws InvalidRolloutError (naming the field) before anything is sent when it is invalid. */
export async function publishRollout(js: JetStreamClient, rollout: RolloutCompletedInput): Promise<PubAck> {
  const parsed = RolloutCompleted.safeParse(rollout);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new InvalidRolloutError(`rollout ${JSON.stringify(rollout.id)}: '${issue?.path.join(".") ?? ""}' ${issue?.message ?? "is invalid"}`);
  }
  return js.publish(subjects(rollout.policy).rollouts, JSON.stringify(rollout), { msgID: rollout.id });
}
