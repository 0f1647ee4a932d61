// The bus as users run it: a real 3-node JetStream cluster on loopback (test/helpers/nats-cluster.ts), everything the
// daemon owns at 3 replicas, and leaders killed with SIGKILL at the worst moments — the rollout stream's leader during
// intake, the state bucket's leader during a commit, the object store's leader during a publish. The daemon (a child
// process, the test-double trainer) rides through each election: every rollout ends in exactly one committed round
// or one rejection, and every round's adapter is announced once, in order.
import { afterEach, describe, expect, it } from "vitest";
import { EVENT_STREAM, IDS_BUCKET, ROLLOUT_STREAM, STATE_BUCKET, ADAPTER_BUCKET, consumerName, subjects, type AdapterPublished } from "../src/contract/index.js";
import { StateStore } from "../src/loop/state.js";
import { startNatsCluster, type NatsCluster } from "./helpers/nats-cluster.js";
import { POLICY, accounting, eventsOn, makeRollout, misaccounted, spawnDaemon, startLoopEnv, waitFor, type DaemonProcess, type LoopEnv } from "./helpers/loop.js";
import type { RolloutCompletedInput } from "../src/contract/index.js";

/** Publishes like a rollout worker through an election: a publish that times out is sent again (same msg id). */
async function publishThrough(env: LoopEnv, rollouts: RolloutCompletedInput[], between?: (i: number) => Promise<void>): Promise<void> {
  for (const [i, r] of rollouts.entries()) {
    await between?.(i);
    await waitFor(`publish of ${r.id}`, () => env.js.publish(subjects(POLICY).rollouts, JSON.stringify(r), { msgID: r.id, timeout: 2000 }).then(() => true, () => null), 60_000);
  }
}

const OWNED = [ROLLOUT_STREAM, EVENT_STREAM, `KV_${STATE_BUCKET}`, `KV_${IDS_BUCKET}`, `OBJ_${ADAPTER_BUCKET}`];

/** Every stream the daemon owns has two current followers: a leader killed before a (new or restarted) follower
 *  caught up would leave the group without a quorum of current peers, a double failure R3 does not survive. */
async function caughtUp(env: LoopEnv): Promise<void> {
  for (const stream of OWNED) {
    await waitFor(`${stream}'s followers current`, async () => {
      const replicas = (await env.jsm.streams.info(stream).catch(() => null))?.cluster?.replicas ?? [];
      return replicas.length === 2 && replicas.every((r) => r.current && !r.offline) ? true : null;
    }, 60_000);
  }
}

describe("loop - a 3-node JetStream cluster, replicas 3", () => {
  let cluster: NatsCluster | null = null;
  let env: LoopEnv | null = null;
  let daemon: DaemonProcess | null = null;
  afterEach(async () => {
    daemon?.child.kill("SIGKILL");
    await daemon?.exited;
    await env?.close();
    await cluster?.stop();
    daemon = null;
    env = null;
    cluster = null;
  });

  it("rides through leader elections: the rollout stream's leader killed during intake, the state bucket's during a commit, the object store's during a publish", async () => {
    const started = Date.now();
    cluster = await startNatsCluster(3);
    // the streams exist at R1 (workers published first): the daemon scales them to R3 in place
    env = await startLoopEnv({ nats: cluster, replicas: 1 });
    const e = env;
    const c = cluster;
    const config = e.writeConfig({
      nats: { url: c.url }, stream: { replicas: 3 }, round: { rows: 8, maxWaitS: null, minRows: 1 }, offPolicy: { maxStaleness: 10 },
      consumer: { ackWaitS: 4, fetchBatch: 16 }, log: { level: "info" },
    });
    const batch = (tag: string) => Promise.all(Array.from({ length: 4 }, (_, i) => makeRollout(tag, i, { steps: 2 })));
    const all: string[] = [];
    const committed = (round: number) => (l: Record<string, unknown>) => l.msg === "round committed" && l.round === round;
    const d = (daemon = spawnDaemon(config));
    const phases: string[] = [];
    let mark = Date.now();
    const phase = (name: string) => {
      phases.push(`${name} ${((Date.now() - mark) / 1000).toFixed(1)} s`);
      mark = Date.now();
    };

    // round 1, undisturbed; the daemon made its buckets R3
    const first = await batch("c1");
    all.push(...first.map((r) => r.id));
    await publishThrough(e, first);
    await d.waitForLog("round 1 committed", committed(1));
    expect(d.lines.some((l) => l.msg === `stream ${ROLLOUT_STREAM} updated to the config: num_replicas 1 → 3`)).toBe(true);
    phase("round 1");
    for (const stream of OWNED) expect((await e.jsm.streams.info(stream)).config.num_replicas, stream).toBe(3);
    await caughtUp(e);

    // intake: the rollout stream's leader dies after the second rollout of round 2 is in
    const intake = await batch("c2");
    all.push(...intake.map((r) => r.id));
    const rolloutLeader = await c.leaderOf(e.jsm, ROLLOUT_STREAM);
    await publishThrough(e, intake, async (i) => {
      if (i !== 2) return;
      // two rollouts held unacked in the open round: intake is under way
      await waitFor("two rollouts of round 2 held", async () => ((await e.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY))).num_ack_pending >= 2 ? true : null));
      await c.kill(rolloutLeader);
    });
    await d.waitForLog("round 2 committed", committed(2));
    expect(await c.leaderOf(e.jsm, ROLLOUT_STREAM)).not.toBe(rolloutLeader);
    phase("round 2, the rollout stream's leader killed");
    await c.restart(rolloutLeader);
    await caughtUp(e);
    phase("restart");

    // commit: the state bucket's leader dies the moment round 3 has trained (the ids, objects and record follow)
    const commit = await batch("c3");
    all.push(...commit.map((r) => r.id));
    const stateLeader = await c.leaderOf(e.jsm, `KV_${STATE_BUCKET}`);
    await publishThrough(e, commit);
    await d.waitForLog("round 3 trained", (l) => l.msg === "round trained" && l.round === 3);
    await c.kill(stateLeader);
    await d.waitForLog("round 3 committed", committed(3));
    phase("round 3, the state bucket's leader killed");
    await c.restart(stateLeader);
    await caughtUp(e);
    phase("restart");

    // publish: the object store's leader dies the moment round 4 is committed (the adapter put and announcement follow)
    const publish = await batch("c4");
    all.push(...publish.map((r) => r.id));
    const objectLeader = await c.leaderOf(e.jsm, `OBJ_${ADAPTER_BUCKET}`);
    await publishThrough(e, publish);
    await d.waitForLog("round 4 committed", committed(4));
    await c.kill(objectLeader);
    // the announcement either goes out after the election, or it had landed before the kill and only its
    // acknowledgement was lost: the retry then finds it announced (CI saw both; the count is checked below)
    await d.waitForLog("round 4 published", (l) => l.round === 4 && (l.msg === "adapter published" || l.msg === "adapter already announced"));
    phase("round 4, the object store's leader killed");
    await c.restart(objectLeader);
    await c.healthy();
    phase("restart");

    const acc = await waitFor("every rollout accounted for and nothing pending", async () => {
      const info = await e.jsm.consumers.info(ROLLOUT_STREAM, consumerName(POLICY)).catch(() => null);
      if (!info || info.num_ack_pending > 0 || info.num_pending > 0) return null;
      const a = await accounting(e);
      return misaccounted(a, all).length === 0 ? a : null;
    }, 90_000).catch(async (err: Error) => {
      throw new Error(`${err.message}: ${misaccounted(await accounting(e), all).join("; ")}`);
    });
    expect(misaccounted(acc, all)).toEqual([]);
    // the test's own reads retry too: right after a server's restart the JetStream API can time out a request
    const state = await waitFor("the state record readable", async () => {
      try {
        return await (await StateStore.open(e.nc, POLICY, 3)).read();
      } catch {
        return null;
      }
    }, 30_000);
    expect(state?.record.round).toBe(4);
    // and until the stream answers with the announcements: a read just after the restart came back empty in CI
    // (the daemon had logged all four)
    const adapters = await waitFor("the four announcements readable", async () => {
      const list = await eventsOn<AdapterPublished>(e.jsm, subjects(POLICY).adapterPublished).catch(() => []);
      return list.length >= 4 ? list : null;
    }, 30_000).catch(async () => eventsOn<AdapterPublished>(e.jsm, subjects(POLICY).adapterPublished));
    expect(adapters.map((a) => a.round)).toEqual([1, 2, 3, 4]);
    phase("settled");
    console.info(`figure: 4 rounds through 3 leader kills on a 3-node cluster in ${((Date.now() - started) / 1000).toFixed(1)} s (${phases.join(", ")})`);
    d.child.kill("SIGTERM");
    expect(await d.exited).toBe(0);
  });
});
