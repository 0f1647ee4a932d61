// Publishing a committed round's adapter (DESIGN.md data flow step 8): the PEFT files go into object store
// rlloop-adapters under <policy>/r<round>/, then one announcement on rlloop.<policy>.adapters. "Once per round"
// holds across crashes twice over: the announcement carries Nats-Msg-Id <policy>.adapter.r<round> (duplicate
// window) and an expected-last-subject-sequence taken from the subject's last message, which is read first: if
// it already announces this round or a later one, nothing is published.
import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import type { ObjectStore } from "@nats-io/obj";
import type { z } from "zod";
import { storeFolder } from "./continuation.js";
import { ADAPTER_FILES } from "./trainer.js";
import { ADAPTER_BUCKET, AdapterPublished, encodeWithNonFinite, EVENT_STREAM, RoundEvent, adapterName, adapterObjectPrefix, msgIds, subjects, type PpoStats, type StoredFolder } from "../contract/index.js";

export interface PublishRequest {
  policy: string;
  round: number;
  adapterDir: string;
  stats: PpoStats;
  /** the adapter it continues, when known */
  parent?: number;
  /** the objects the committed record names for this round (continuation.ts stored them before the commit) */
  stored?: StoredFolder;
}

export type PublishResult = { published: true; event: AdapterPublished } | { published: false; lastRound: number };

/** The last event on `subject`: its stream sequence and round (0 when it does not parse); null when none. */
async function lastRoundOn(jsm: JetStreamManager, subject: string, schema: z.ZodType<{ round: number }>): Promise<{ seq: number; round: number } | null> {
  const msg = await jsm.streams.getMessage(EVENT_STREAM, { last_by_subj: subject });
  if (!msg) return null;
  const parsed = schema.safeParse(msg.json());
  return { seq: msg.seq, round: parsed.success ? parsed.data.round : 0 };
}

/** The last announcement on the policy's adapters subject: its stream sequence and round (null when none). */
export async function lastAnnouncement(jsm: JetStreamManager, policy: string): Promise<{ seq: number; round: number } | null> {
  return lastRoundOn(jsm, subjects(policy).adapterPublished, AdapterPublished);
}

/** The round of the last `round.published` lifecycle event (0 when none): whether an announced round's event is
 *  still owed (a daemon killed between the announcement and its event, or a lost reply to the announcement). */
export async function lastPublishedRoundEvent(jsm: JetStreamManager, policy: string): Promise<number> {
  return (await lastRoundOn(jsm, subjects(policy).round("published"), RoundEvent))?.round ?? 0;
}

export interface PublishHooks {
  /** called between the object-store put and the announcement (test pause point) */
  afterPut?: () => Promise<void>;
}

export async function publishAdapter(
  nats: { js: JetStreamClient; jsm: JetStreamManager }, store: ObjectStore, req: PublishRequest, hooks: PublishHooks = {},
): Promise<PublishResult> {
  const last = await lastAnnouncement(nats.jsm, req.policy);
  if (last && last.round >= req.round) return { published: false, lastRound: last.round };
  const prefix = adapterObjectPrefix(req.policy, req.round);
  // the files were stored before the commit (continuation.ts): objects holding the same bytes are not put again
  const stored = await storeFolder(store, nats.jsm, req.adapterDir, prefix, ADAPTER_FILES, req.stored);
  if (stored.files.length !== ADAPTER_FILES.length) throw new Error(`round ${req.round}: ${req.adapterDir} lacks ${ADAPTER_FILES.filter((n) => !stored.files.some((f) => f.name === n)).join(", ")}`);
  const files = stored.files.map((f) => ({ name: f.name, object: `${prefix}/${f.name}`, sha256: f.sha256, size: f.size }));
  await hooks.afterPut?.();
  const event: AdapterPublished = {
    type: "adapter.published",
    policy: req.policy,
    round: req.round,
    name: adapterName(req.policy, req.round),
    path: req.adapterDir,
    object: prefix,
    bucket: ADAPTER_BUCKET,
    sha256: files.find((f) => f.name === "adapter_model.safetensors")?.sha256 ?? "",
    files,
    stats: req.stats,
    ...(req.parent === undefined ? {} : { parent: req.parent }),
    at: new Date().toISOString(),
  };
  try {
    await nats.js.publish(subjects(req.policy).adapterPublished, encodeWithNonFinite(event), {
      msgID: msgIds.adapter(req.policy, req.round),
      expect: { lastSubjectSequence: last?.seq ?? 0 },
    });
  } catch (err) {
    // a previous attempt's announcement may have landed (reply lost): then this round is published
    const now = await lastAnnouncement(nats.jsm, req.policy);
    if (now && now.round >= req.round) return { published: false, lastRound: now.round };
    throw err;
  }
  return { published: true, event };
}
