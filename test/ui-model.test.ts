// The web UI's pure parts: the store folds what the source reports into the view model and coalesces patches;
// the page's copy applies them; the reward interval; the rejection plot's columns; the rollbacks' markers and
// words; who may read the page; the view model's JSON keeps NaN a number.
import type { IncomingMessage } from "node:http";
import { describe, expect, test, vi } from "vitest";
import { checkAccess, isLoopbackHost, LOOPBACK_HOSTS, TOKEN_COOKIE } from "../src/tools/ui/access.js";
import type { RollbackRow, UiPatch, UiSnapshot } from "../src/tools/ui/model.js";
import { decodeView, encodeView } from "../src/tools/ui/view-codec.js";
import { rejectionColumns, tickLabels } from "../src/tools/ui/page/charts.js";
import { num } from "../src/tools/ui/page/format.js";
import { drawMarks, markLabel, marksSentence, rollbackMarks } from "../src/tools/ui/page/markers.js";
import { evidenceText, rollbackNotes, servingDetail, servingNote } from "../src/tools/ui/page/rollbacks.js";
import { applyPatch } from "../src/tools/ui/page/view-state.js";
import { KEPT_REJECTIONS, KEPT_ROUNDS } from "../src/tools/ui/model.js";
import { RewardTally } from "../src/tools/ui/reward.js";
import { UiStore } from "../src/tools/ui/store.js";

/** A rollback as the source reports it: an operator's from r`from` to r`to` after round `round` unless told. */
const rollback = (seq: number, over: Partial<RollbackRow> = {}): RollbackRow => ({
  seq, trigger: "manual", fromRound: 4, regressedRound: null, toRound: 2, toName: "bt-r2", toSha256: "ab".repeat(32), committedRound: 4,
  reason: `rollback ${seq}`, evidence: null, atMs: 1000 * seq, ...over,
});
const EVIDENCE = {
  test: "paired", alpha: 0.05, minEffect: 0.05, candidate: { round: 3, count: 96, mean: 0.25, bound: 0.31 }, baseline: { round: 2, count: 192, mean: 0.85, bound: 0.8 },
  pairs: 40, differenceUpper: -0.49,
} as const;

const newStore = () => new UiStore({ policy: "bt", source: "nats://x", meanings: { phases: {}, reasons: {}, triggers: {} }, flushMs: 10_000 });

describe("ui - store", () => {
  test("a round's row folds its steps; latency runs from the close to the announcement", () => {
    const store = newStore();
    store.round(3, { status: "closed", rows: 8, closedAtMs: 1000 });
    store.round(3, { status: "trained", pg_loss: -0.1, rows: 7, train_s: 2 });
    store.round(3, { status: "committed", outcome: "published", finishedAtMs: 3000 });
    expect(store.snapshot().rounds[0]).toMatchObject({ round: 3, status: "committed", rows: 7, pg_loss: -0.1, latency_s: 2 });
    store.round(3, { status: "published", finishedAtMs: 3500 });
    expect(store.snapshot().rounds[0]).toMatchObject({ status: "published", latency_s: 2.5 });
  });

  test("summaries fill only rounds the events did not tell", () => {
    const store = newStore();
    store.round(2, { status: "published", kl: 0.1 });
    store.roundIfMissing(2, { status: "rejected", kl: 9 });
    store.roundIfMissing(1, { status: "published", kl: 0.2 });
    expect(store.snapshot().rounds.map((r) => [r.round, r.status, r.kl])).toEqual([[1, "published", 0.2], [2, "published", 0.1]]);
  });

  test("rejections count per reason once per stream sequence, the newest message kept", () => {
    const store = newStore();
    store.rejection({ atMs: 2, reason: "code_length", message: "second", id: "b", seq: 8 });
    store.rejection({ atMs: 1, reason: "code_length", message: "first", id: "a", seq: 7 });
    store.rejection({ atMs: 1, reason: "code_length", message: "first", id: "a", seq: 7 });
    store.rejection({ atMs: 3, reason: "stale_adapter", message: "old", id: "c", seq: 9 });
    const snap = store.snapshot();
    expect(snap.reasons).toEqual([
      { reason: "code_length", count: 2, lastAtMs: 2, lastMessage: "second" },
      { reason: "stale_adapter", count: 1, lastAtMs: 3, lastMessage: "old" },
    ]);
    expect(snap.rejections.map((r) => r.seq)).toEqual([8, 7, 9]);
  });

  test("keeps the newest maxRounds rounds, with their adapters and rewards, and the newest maxRejections rejections", () => {
    const store = new UiStore({ policy: "bt", source: "x", meanings: { phases: {}, reasons: {}, triggers: {} }, flushMs: 10_000, maxRounds: 4, maxRejections: 4 });
    for (let round = 1; round <= 12; round++) {
      store.round(round, { status: "published" });
      store.reward(round, 0.5);
      store.adapter({ round, name: `bt-r${round}` } as Parameters<UiStore["adapter"]>[0]);
      store.rejection({ atMs: round, reason: "code_length", message: "m", id: `r${round}`, seq: round });
    }
    const snap = store.snapshot();
    expect(snap.rounds.length).toBeLessThanOrEqual(5); // trimmed to 4 whenever it passes 5
    expect(snap.rounds.at(-1)?.round).toBe(12);
    const oldest = snap.rounds[0]!.round;
    expect(snap.adapters.every((a) => a.round >= oldest)).toBe(true);
    expect(snap.rewards.every((r) => r.adapterRound >= oldest)).toBe(true);
    expect(snap.rejections.map((r) => r.seq)).toEqual([9, 10, 11, 12]);
    expect(snap.reasons).toEqual([{ reason: "code_length", count: 12, lastAtMs: 12, lastMessage: "m" }]); // counts stay exact
  });

  test("a replica keeps the newest event per adapter, newest first", () => {
    const store = newStore();
    store.replicaLoad("http://a", { name: "bt-r1", status: "load_failed", reason: "503", atMs: 1 });
    store.replicaLoad("http://a", { name: "bt-r1", status: "loaded", reason: null, atMs: 2 });
    store.replicaLoad("http://a", { name: "bt-r1", status: "load_failed", reason: "late", atMs: 1 });
    store.replicaLoad("http://a", { name: "bt-r2", status: "loaded", reason: null, atMs: 3 });
    expect(store.snapshot().replicas).toEqual([{ replica: "http://a", loads: [
      { name: "bt-r2", status: "loaded", reason: null, atMs: 3 }, { name: "bt-r1", status: "loaded", reason: null, atMs: 2 },
    ] }]);
  });

  test("a rollback is kept once per seq: a duplicated announcement changes nothing, and replaces what the state record told", () => {
    const store = newStore();
    store.rollbackIfMissing(rollback(1, { reason: "from the state record", toSha256: null }));
    store.rollback(rollback(1, { reason: "announced" }));
    store.rollback(rollback(1, { reason: "announced again, differently" }));
    store.rollbackIfMissing(rollback(1, { reason: "the state record again" }));
    store.rollback(rollback(3));
    store.rollbackIfMissing(rollback(2, { reason: "only in the state record" }));
    expect(store.snapshot().rollbacks.map((r) => [r.seq, r.reason, r.toSha256])).toEqual([
      [1, "announced", "ab".repeat(32)], [2, "only in the state record", "ab".repeat(32)], [3, "rollback 3", "ab".repeat(32)],
    ]);
  });

  test("many rollbacks, out of order and duplicated, are one patch and one ordered list", () => {
    vi.useFakeTimers();
    try {
      const store = new UiStore({ policy: "bt", source: "x", meanings: { phases: {}, reasons: {}, triggers: {} }, flushMs: 100 });
      const patches: UiPatch[] = [];
      store.subscribe((p) => patches.push(p));
      const seqs = Array.from({ length: 2000 }, (_, i) => ((i * 7919) % 2000) + 1);
      for (const seq of [...seqs, ...seqs.slice(0, 500)]) store.rollback(rollback(seq, { committedRound: Math.ceil(seq / 50) }));
      vi.advanceTimersByTime(100);
      expect(patches).toHaveLength(1);
      expect(patches[0]?.rollbacks).toHaveLength(2000);
      const snap = store.snapshot();
      expect(snap.rollbacks.map((r) => r.seq)).toEqual(Array.from({ length: 2000 }, (_, i) => i + 1));
      const view = applyPatch({ ...snap, revision: 0, rollbacks: [] }, patches[0] as UiPatch);
      expect(view.rollbacks.map((r) => r.seq)).toEqual(snap.rollbacks.map((r) => r.seq));
    } finally {
      vi.useRealTimers();
    }
  });

  test("changes are coalesced into one patch; a snapshot flushes first, so a new listener misses nothing and gets nothing twice", () => {
    vi.useFakeTimers();
    try {
      const store = new UiStore({ policy: "bt", source: "x", meanings: { phases: {}, reasons: {}, triggers: {} }, flushMs: 100 });
      const early: UiPatch[] = [];
      store.subscribe((p) => early.push(p));
      for (let i = 0; i < 50; i++) store.reward(1, i);
      store.round(1, { status: "closed" });
      expect(early).toEqual([]);
      vi.advanceTimersByTime(100);
      expect(early).toHaveLength(1);
      expect(early[0]?.rewards).toEqual([expect.objectContaining({ adapterRound: 1, count: 50 })]);
      expect(early[0]?.rounds?.map((r) => r.round)).toEqual([1]);

      store.round(2, { status: "closed" });
      const snap = store.snapshot(); // flushes round 2 to `early`
      expect(early).toHaveLength(2);
      const late: UiPatch[] = [];
      store.subscribe((p) => late.push(p));
      store.round(3, { status: "closed" });
      vi.advanceTimersByTime(100);
      expect(snap.rounds.map((r) => r.round)).toEqual([1, 2]);
      expect(late.map((p) => p.rounds?.map((r) => r.round))).toEqual([[3]]);
      expect(late[0]?.revision).toBeGreaterThan(snap.revision);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe("ui - the page's copy of the view model", () => {
  const base = (): UiSnapshot => {
    const store = newStore();
    store.round(1, { status: "published" });
    store.round(2, { status: "training" });
    return store.snapshot();
  };

  test("a patch replaces rows by key and appends new ones in order", () => {
    const view = base();
    const round = (r: number, status: string) => ({ ...view.rounds[0], round: r, status }) as UiSnapshot["rounds"][number];
    const next = applyPatch(view, { revision: view.revision + 1, rounds: [round(2, "published"), round(4, "closed"), round(3, "closed")] });
    expect(next.rounds.map((r) => [r.round, r.status])).toEqual([[1, "published"], [2, "published"], [3, "closed"], [4, "closed"]]);
    expect(view.rounds).toHaveLength(2); // the old copy is untouched
  });

  test("a page left open keeps what the monitor keeps: the newest KEPT_ROUNDS rounds with their adapters, the newest KEPT_REJECTIONS rejections", () => {
    const view = base();
    const round = (r: number) => ({ ...view.rounds[0], round: r }) as UiSnapshot["rounds"][number];
    const rounds = Array.from({ length: KEPT_ROUNDS + 5 }, (_, i) => round(i + 1));
    const rejections = Array.from({ length: KEPT_REJECTIONS + 3 }, (_, i) => ({ atMs: i, reason: "code_length", message: "m", id: `r${i}`, seq: i }));
    const adapters = [1, 6, KEPT_ROUNDS + 5].map((r) => ({ round: r, name: `bt-r${r}` }) as UiSnapshot["adapters"][number]);
    const next = applyPatch(view, { revision: view.revision + 1, rounds, rejections, adapters });
    expect(next.rounds).toHaveLength(KEPT_ROUNDS);
    expect(next.rounds[0]?.round).toBe(6);
    expect(next.adapters.map((a) => a.round)).toEqual([6, KEPT_ROUNDS + 5]);
    expect(next.rejections).toHaveLength(KEPT_REJECTIONS);
    expect(next.rejections[0]?.seq).toBe(3);
  });

  test("a patch's rollbacks replace by seq and keep the list in seq order", () => {
    const view = { ...base(), rollbacks: [rollback(1), rollback(3)] };
    const next = applyPatch(view, { revision: view.revision + 1, rollbacks: [rollback(2), rollback(3, { reason: "again" })] });
    expect(next.rollbacks.map((r) => [r.seq, r.reason])).toEqual([[1, "rollback 1"], [2, "rollback 2"], [3, "again"]]);
  });

  test("a patch not newer than the view changes nothing", () => {
    const view = base();
    expect(applyPatch(view, { revision: view.revision, rounds: [] })).toBe(view);
  });
});

describe("ui - reward interval", () => {
  test("mean, sample sd and the 95% interval of the mean; no interval below two rollouts", () => {
    const tally = new RewardTally();
    tally.add(1);
    expect(tally.point(0)).toEqual({ adapterRound: 0, count: 1, mean: 1, sd: null, lo: null, hi: null });
    for (const r of [2, 3, 4]) tally.add(r);
    const p = tally.point(0);
    const sd = Math.sqrt(5 / 3);
    expect(p.mean).toBe(2.5);
    expect(p.sd).toBeCloseTo(sd, 12);
    expect(p.lo).toBeCloseTo(2.5 - (1.96 * sd) / 2, 12);
    expect(p.hi).toBeCloseTo(2.5 + (1.96 * sd) / 2, 12);
  });

  test("Welford stays exact where the naive sum of squares cancels", () => {
    const tally = new RewardTally();
    for (const r of [1e9 + 4, 1e9 + 7, 1e9 + 13, 1e9 + 16]) tally.add(r);
    expect(tally.point(0).sd).toBeCloseTo(Math.sqrt(30), 9);
  });
});

describe("ui - rejection plot", () => {
  const rej = (atMs: number, reason: string) => ({ atMs, reason, message: "", id: null, seq: atMs });
  const totals = (counts: Record<string, number>) => Object.entries(counts).map(([reason, count]) => ({ reason, count, lastAtMs: 0, lastMessage: "" }));

  test("cumulative counts per reason, carried on to now", () => {
    const cols = rejectionColumns([rej(1000, "a"), rej(3000, "b"), rej(2000, "a")], totals({ a: 2, b: 1 }), 10_000);
    expect(cols).toEqual({ x: [1, 2, 3, 10], series: { a: [1, 2, 2, 2], b: [0, 0, 1, 1] } });
  });

  test("rejections older than those kept count from the start, so the steps end at each reason's total", () => {
    const cols = rejectionColumns([rej(1000, "a"), rej(2000, "b")], totals({ a: 10, b: 1 }), 2000);
    expect(cols).toEqual({ x: [1, 2], series: { a: [10, 10], b: [0, 1] } });
  });

  test("a long history is bucketed to a few hundred points without losing the totals", () => {
    const many = Array.from({ length: 50_000 }, (_, i) => ({ atMs: i * 10, reason: i % 3 === 0 ? "a" : "b", message: "", id: null, seq: i }));
    const cols = rejectionColumns(many, totals({ a: 16_667, b: 33_333 }), 0);
    expect(cols.x.length).toBeLessThanOrEqual(601);
    expect([cols.series.a?.at(-1), cols.series.b?.at(-1)]).toEqual([16_667, 33_333]);
  });
});

describe("ui - rollback markers", () => {
  test("one marker per committing round, in round order, its rollbacks by seq", () => {
    const marks = rollbackMarks([rollback(3, { committedRound: 9 }), rollback(1, { committedRound: 4 }), rollback(2, { committedRound: 9 })]);
    expect(marks).toEqual([{ round: 4, seqs: [1] }, { round: 9, seqs: [2, 3] }]);
    expect(marks.map(markLabel)).toEqual(["↶ #1", "↶ #2 +1"]);
    expect(marksSentence(marks)).toBe(" 3 rollbacks at 2 rounds, the last at round 9.");
    expect(marksSentence(marks.slice(0, 1))).toBe(" Rollback at round 4 (#1).");
    expect(marksSentence([])).toBe("");
  });

  test("many rollbacks at few rounds stay a few markers", () => {
    const many = Array.from({ length: 5000 }, (_, i) => rollback(i + 1, { committedRound: (i % 7) + 1 }));
    const marks = rollbackMarks(many);
    expect(marks.map((m) => [m.round, m.seqs.length])).toEqual(Array.from({ length: 7 }, (_, i) => [i + 1, i < 2 ? 715 : 714]));
    expect(markLabel(marks[0] as never)).toBe("↶ #1 +714");
  });

  test("only markers within the plotted rounds are drawn: a round the page never saw draws nothing", () => {
    const strokes: number[] = [];
    let x = 0;
    const ctx = new Proxy({}, {
      get: (_t, name) => name === "moveTo" ? (px: number) => (x = px) : name === "stroke" ? () => strokes.push(x) : name === "measureText" ? () => ({ width: 30 }) : () => {},
      set: () => true,
    });
    const u = { scales: { x: { min: 1, max: 6 } }, bbox: { left: 50, top: 10, width: 500, height: 200 }, ctx, valToPos: (v: number) => 50 + (v - 1) * 100 };
    const drawn = drawMarks(u as never, rollbackMarks([rollback(1, { committedRound: 4 }), rollback(2, { committedRound: 999 }), rollback(3, { committedRound: 0 })]));
    expect(drawn).toEqual([{ round: 4, seqs: [1], x: 350 }]);
    expect(strokes).toEqual([350]);
    expect(drawMarks({ ...u, scales: { x: {} } } as never, rollbackMarks([rollback(1)]))).toEqual([]);
  });
});

describe("ui - rollbacks in words", () => {
  const live = (round: number | null) => ({ servingAdapter: round === null ? null : { round, name: `bt-r${round}`, sha256: "cd".repeat(32) } }) as UiSnapshot["live"];

  test("the guard's evidence: its test, both sides and the decision's numbers; none for an operator's", () => {
    expect(evidenceText(EVIDENCE)).toBe("paired test over 40 groups · r3: 96 rollouts, mean 0.2500, upper bound 0.3100 · r2: 192 rollouts, mean 0.8500, lower bound 0.8000"
      + " · upper bound of r3 − r2: -0.4900 (a rollback needs < -0.0500) · α 0.0500");
    expect(evidenceText({ ...EVIDENCE, test: "unpaired", pairs: null })).toMatch(/^unpaired test · r3: 96 rollouts/);
    expect(evidenceText(null)).toBe("none: an operator's rollback");
  });

  test("the serving adapter is the newest rollback's target, or the round the guard trained again from it", () => {
    const manual = [rollback(1, { fromRound: 4, toRound: 2, committedRound: 4 })];
    expect(servingNote({ live: live(2), rollbacks: manual })).toBe("rolled back from r4 (#1, manual)");
    expect(servingDetail({ live: live(2), rollbacks: manual })).toBe(`${"cd".repeat(6)} · rolled back from r4 (#1, manual)`);
    const guard = [rollback(1, { trigger: "guard", fromRound: 4, regressedRound: 3, toRound: 2, committedRound: 5, evidence: EVIDENCE })];
    expect(servingNote({ live: live(5), rollbacks: guard })).toBe("trained again from r2 after rollback #1");
    // the loop moved on since, or no rollback: the card says the sha256 only
    expect(servingNote({ live: live(6), rollbacks: guard })).toBeNull();
    expect(servingDetail({ live: live(6), rollbacks: [] })).toBe("cd".repeat(6));
    expect(servingDetail({ live: live(null), rollbacks: guard })).toBe("");
    // a rollback naming adapters the page has never seen is told as it is
    expect(servingNote({ live: live(77), rollbacks: [rollback(9, { fromRound: 500, toRound: 77, committedRound: 900 })] })).toBe("rolled back from r500 (#9, manual)");
  });

  test("what each rollback did to each adapter: left, found worse, gone back to", () => {
    const notes = rollbackNotes([
      rollback(1, { trigger: "guard", fromRound: 4, regressedRound: 3, toRound: 2, committedRound: 5 }),
      rollback(2, { fromRound: 6, toRound: 4, committedRound: 6 }),
    ]);
    expect(Object.fromEntries([...notes].map(([round, n]) => [round, n.map((x) => x.text)]))).toEqual({
      4: ["rolled back #1 → r2", "target of #2"], 3: ["found worse #1"], 2: ["target of #1"], 6: ["rolled back #2 → r4"],
    });
  });
});

describe("ui - axis ticks", () => {
  test.each([
    [[0.0005, 0.00075, 0.001], 0.00025, ["0.00050", "0.00075", "0.00100"]],
    [[0, 0.5, 1], 0.5, ["0.0", "0.5", "1.0"]],
    [[-20, 0, 20], 20, ["-20", "0", "20"]],
    [[7.5, 10], 2.5, ["7.5", "10.0"]],
  ])("ticks %j in steps of %s read %j", (ticks, step, labels) => {
    expect(tickLabels(null as never, ticks, 1, 0, step)).toEqual(labels);
  });
});

describe("ui - access", () => {
  const req = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;
  const url = (q = "") => new URL(`http://h/${q}`);
  const loopback = { token: null, allowedHosts: LOOPBACK_HOSTS, basePath: "/" };

  test.each([
    ["127.0.0.1:9465", true], ["localhost:9465", true], ["[::1]:9465", true], ["LOCALHOST", true],
    ["evil.example:9465", false], ["127.0.0.1.evil.example", false], ["", false],
  ])("loopback without a token: Host %s → %s", (host, ok) => {
    expect(checkAccess(req({ host }), url(), loopback).ok).toBe(ok);
  });

  test("a token is taken from the query (then set as a cookie), a bearer header or the cookie; nothing else", () => {
    const o = { token: "t0k", allowedHosts: null, basePath: "/ui/" };
    expect(checkAccess(req({}), url(), o)).toMatchObject({ ok: false, status: 401 });
    expect(checkAccess(req({}), url("?token=nope"), o)).toMatchObject({ ok: false, status: 401 });
    expect(checkAccess(req({}), url("?token=t0k"), o)).toEqual({ ok: true, setCookie: `${TOKEN_COOKIE}=t0k; HttpOnly; SameSite=Strict; Path=/ui/` });
    expect(checkAccess(req({ authorization: "Bearer t0k" }), url(), o)).toEqual({ ok: true, setCookie: null });
    expect(checkAccess(req({ cookie: `x=1; ${TOKEN_COOKIE}=t0k` }), url(), o)).toEqual({ ok: true, setCookie: null });
    expect(checkAccess(req({ cookie: `${TOKEN_COOKIE}=t0k2` }), url(), o).ok).toBe(false);
  });

  test.each([["127.0.0.1", true], ["127.1.2.3", true], ["::1", true], ["0.0.0.0", false], ["10.0.0.5", false]])("isLoopbackHost(%s) = %s", (h, ok) => {
    expect(isLoopbackHost(h)).toBe(ok);
  });
});

describe("ui - view model JSON", () => {
  test("non-finite statistics survive; strings that read NaN stay strings", () => {
    const store = newStore();
    store.round(1, { status: "rejected", pg_loss: Number.NaN, kl: Number.POSITIVE_INFINITY, note: "NaN" });
    store.round(2, { status: "published", pg_loss: -0.5 });
    store.rejection({ atMs: 1, reason: "invalid_schema", message: "Infinity", id: "NaN", seq: 1 });
    store.rollback(rollback(1));
    store.rollback(rollback(2, { trigger: "guard", evidence: EVIDENCE, reason: "NaN" }));
    const snap = store.snapshot();
    const back = decodeView<UiSnapshot>(encodeView(snap));
    expect(back).toEqual(snap);
    expect(back.rounds[0]?.pg_loss).toBeNaN();
    expect(back.rejections[0]).toMatchObject({ message: "Infinity", id: "NaN" });
    expect(snap.rounds[0]?.pg_loss, "encoding leaves the store's rows alone").toBeNaN();
  });

  test.each([[null, "–"], [Number.NaN, "NaN"], [Number.NEGATIVE_INFINITY, "-inf"], [0, "0"], [-0.01234, "-0.0123"], [0.0004, "4.00e-4"], [256, "256"], [123.456, "123.5"]])(
    "num(%s) = %s", (v, text) => expect(num(v)).toBe(text),
  );
});
