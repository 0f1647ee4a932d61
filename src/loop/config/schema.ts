// The daemon's configuration schema: the single place of every default and every field's meaning. config/README.md's
// tables, config/default.json and schema/config.schema.json are generated from it (scripts/gen-schemas.ts; a test
// fails when they are stale). Unknown keys and wrong types fail by name.
import { z } from "zod";
import { AdvantageEstimator, Attention, Checkpointing, DeviceKind, DType, POLICY_NAME, Tf32 } from "../../contract/index.js";

const doc = <T extends z.ZodType>(schema: T, description: string): T => schema.meta({ description }) as T;
const positiveInt = () => z.number().int({ error: "must be an integer" }).positive({ error: "must be a positive integer" });
const nonNegativeInt = () => z.number().int({ error: "must be an integer" }).min(0, { error: "must be >= 0" });
const seconds = () => z.number().positive({ error: "must be a positive number of seconds" });
/** A limit a timer waits for: Node's timers fire at once past 2^31 - 1 ms (~24.8 days), which would end every job. */
const timerSeconds = () => seconds().max(2_147_483, { error: "must be at most 2147483 s (~24.8 days, a timer's range); null for no limit" });
const threshold = () => z.number().nonnegative().nullable();
/**
 * Reward bounds are capped so that every advantage stays far inside float32, the trainer's type for it: an rloo
 * advantage is up to twice a reward, a return a sum of up to maxSteps of them (advantages.ts). Past ~1.7e38 one
 * rollout's advantage would be Infinity in the trainer, and its whole round a non-finite rejection.
 */
const REWARD_CAP = 1e15;

const Policy = z.strictObject({
  name: doc(z.string().regex(POLICY_NAME, { error: `must match ${POLICY_NAME}` }).default("bt"), "policy name: the subject token of `rlloop.<policy>.*`, the KV key, the adapter name prefix (`<policy>-r<round>`); letters, digits, `_`, `-`"),
  codeLength: doc(positiveInt().max(64).default(6), "digits in a behaviour code (one per FSQ dimension); a step with another length is rejected (`code_length`)"),
  maxSteps: doc(positiveInt().default(64), "most decision steps in one rollout (`too_many_steps` above)"),
});

const Tls = z.strictObject({
  ca: doc(z.string().nullable().default(null), "CA certificate file that verifies the server"),
  cert: doc(z.string().nullable().default(null), "client certificate file (mutual TLS)"),
  key: doc(z.string().nullable().default(null), "client key file (redacted)"),
});

const Nats = z.strictObject({
  url: doc(z.string().nullable().default(null), "NATS server URL(s), comma-separated. `null`: the daemon starts its own `nats-server` (JetStream, store under `<workDir>/nats/store`) as a child process and stops it on exit; after a SIGKILL the next daemon adopts the still-running server"),
  user: doc(z.string().nullable().default(null), "user name (with `nats.pass`)"),
  pass: doc(z.string().nullable().default(null), "password (redacted in logs)"),
  token: doc(z.string().nullable().default(null), "token authentication (redacted)"),
  nkeySeed: doc(z.string().nullable().default(null), "user nkey seed (`SU…`) for nkey authentication (redacted; prefer RLLOOP_NATS_NKEY_SEED)"),
  credsFile: doc(z.string().nullable().default(null), "path of a `.creds` file (JWT + nkey seed)"),
  tls: doc(Tls.nullable().default(null), "TLS: `{\"ca\": path, \"cert\": path, \"key\": path}` (each may be null)"),
  name: doc(z.string().default("rlloop-daemon"), "connection name shown by the server"),
  serverBin: doc(z.string().nullable().default(null), "own server: the binary (2.11 or later); `null` = the release `scripts/setup.sh` installed (`scripts/versions.sh`), else `nats-server` on PATH"),
  serverHost: doc(z.string().default("127.0.0.1"), "own server: listen address"),
  serverPort: doc(nonNegativeInt().max(65535).default(0), "own server: port; 0 = a free port"),
});

const Stream = z.strictObject({
  maxAgeS: doc(seconds().default(30 * 86400), "age limit of `RLLOOP_ROLLOUTS`; rounds older than this can no longer be replayed"),
  duplicateWindowS: doc(seconds().default(600), "duplicate window of `RLLOOP_ROLLOUTS`: a rollout re-published with the same Nats-Msg-Id (its id) within it is dropped by the server"),
  eventsMaxAgeS: doc(seconds().default(30 * 86400), "age limit of `RLLOOP_EVENTS` (rejections, round lifecycle, adapter announcements)"),
  eventsDuplicateWindowS: doc(seconds().default(86400), "duplicate window of `RLLOOP_EVENTS`: a restart that repeats a rejection or announcement within it records nothing new"),
  replicas: doc(positiveInt().max(5).refine((n) => n % 2 === 1, { error: "must be 1, 3 or 5 (an even count survives no more node failures than the odd count below it)" }).default(1),
    "replicas of everything the daemon owns: both streams, the KV buckets `rlloop` and `rlloop-ids`, the object store `rlloop-adapters`. 1 on a single server; 3 on a JetStream cluster of 3 or more nodes (survives one node down); changed in place at start"),
});

const Consumer = z.strictObject({
  ackWaitS: doc(seconds().default(60), "ack wait; the daemon calls `working()` on held messages every third of it, so a message is redelivered only when the daemon died. After a crash, unacked rollouts come back after this delay"),
  maxAckPending: doc(positiveInt().nullable().default(null), "messages handed out unacked; `null` = 2 × `round.rows` + 2 × `consumer.fetchBatch` + 64 (the training round, the open round, one fetch) + `consumer.waitingRollouts`"),
  waitingRollouts: doc(nonNegativeInt().max(100_000).default(10_000), "room in the default `maxAckPending` (ignored when that is set) for rollouts waiting on a fault not theirs (a hung frames root, a missing object store: nak'd, still pending on the consumer), so that they do not hold the stream for the others while the host is put right; copies of a rollout id wait here for the round holding another copy, while there is room. Each waiting rollout is judged again every 5 min and the server scans the pending ones at each redelivery: ~5% of a core at 10,000 waiting, ~65% at 200,000"),
  fetchBatch: doc(positiveInt().default(128), "messages per pull request"),
});

const Frames = z.strictObject({
  roots: doc(z.array(z.string()).default([]), "directories a `{path}` frame must resolve inside (symlinks followed); relative frame paths are relative to the first root. Empty: `{path}` frames are refused (`image_outside_roots`)"),
  rootTimeoutS: doc(seconds().max(3600).default(10), "deadline of one file-system call under a frame root: a root that does not answer within it (a hung network mount) counts as hung, and its frames are read again later (the host's fault, never the rollout's) until its overdue calls return"),
  objectBucket: doc(z.string().default("rlloop-frames"), "object store holding `{object}` frames"),
  maxBytes: doc(positiveInt().default(16 * 1024 * 1024), "largest encoded frame (file, object or decoded base64). An inline frame must also fit the server's `max_payload` (1 MiB by default): the daemon warns at start when this is larger than what an inline frame can carry"),
  maxPixels: doc(positiveInt().default(4096 * 4096), "largest frame, width × height"),
});

const Range = z.strictObject({
  min: z.number().min(-REWARD_CAP).max(REWARD_CAP),
  max: z.number().min(-REWARD_CAP).max(REWARD_CAP),
});

const Limits = z.strictObject({
  maxPayloadBytes: doc(positiveInt().default(8 * 1024 * 1024), "largest rollout message (`too_large` above); the server's `max_payload` bounds it too"),
  maxDepth: doc(positiveInt().max(1000).default(16), "deepest JSON nesting of a rollout, checked before it is parsed (`too_deep`)"),
  maxIdChars: doc(positiveInt().default(256), "longest `id`, `group` and `adapter.name` (`string_too_long`)"),
  maxNameChars: doc(positiveInt().default(256), "longest step `name`, which is part of the prompt (`string_too_long`)"),
  maxMemoryChars: doc(positiveInt().default(256), "longest memory string of a step, part of the prompt (`string_too_long`)"),
  maxMetaBytes: doc(positiveInt().default(64 * 1024), "largest JSON of the unknown top-level fields, kept as `meta` (`meta_too_large`)"),
  reward: doc(Range.default({ min: -1e6, max: 1e6 }), `bounds of the episode reward and of every step reward (\`reward_out_of_range\`); |bounds| ≤ ${REWARD_CAP}, so no advantage can overflow float32, the trainer's type`),
  minLogp: doc(z.number().max(0).min(-1e6).default(-1000), "smallest accepted `vllm_logp` (`logp_out_of_range`)"),
});

const Round = z.strictObject({
  rows: doc(positiveInt().default(256), "close when the open round has this many decision rows (steps)"),
  groups: doc(positiveInt().nullable().default(null), "close when it has this many complete groups (needs `round.groupSize`); null = off"),
  groupSize: doc(positiveInt().nullable().default(null), "rollouts per group; when set, a round closed by rows or groups takes complete groups and ungrouped rollouts and carries incomplete groups to the next round; one that stalled (no member came for `round.maxWaitS`, or while 3 closes left it behind) trains as it is"),
  maxWaitS: doc(seconds().nullable().default(600), "close when this long passed since the open round's oldest rollout arrived (incomplete groups a close left behind count from their arrival) and it has at least `round.minRows`; null = off"),
  minRows: doc(positiveInt().default(32), "rows a round needs to close by `round.maxWaitS` (capped at `round.rows`)"),
});

const OffPolicy = z.strictObject({
  maxStaleness: doc(nonNegativeInt().default(1), "a rollout served by an adapter more than this many adapters behind when it reached the stream — counted in the order they were announced (each published adapter, a rollback's target again), among those announced before it arrived, so a restart or a wait does not change its verdict — is rejected (`stale_adapter`); 0 = strictly on-policy"),
});

const Advantage = z.strictObject({
  estimator: doc(z.enum(Object.keys(AdvantageEstimator) as [keyof typeof AdvantageEstimator]).default("grpo"), "`grpo`: per group (R − mean)/(std + eps), groups of one against the round; `rloo`: R − mean of the others in the group (of the round for singletons); `return`: per-step discounted return-to-go, normalised over the round"),
  eps: doc(z.number().positive().default(1e-6), "added to the standard deviation"),
  gamma: doc(z.number().min(0).max(1).default(1), "discount of the `return` estimator"),
});

const Adapter = z.strictObject({
  initial: doc(z.string().nullable().default(null), "**required on first start**: the SFT adapter dir (PEFT layout) that round 1 continues; recorded in the state as adapter round 0"),
  reference: doc(z.string().nullable().default(null), "frozen reference adapter of the KL term; null = `adapter.initial`"),
});

const Trainer = z.strictObject({
  model: doc(z.string().nullable().default(null), "**required** (unless `trainer.command` is set): the Hugging Face Qwen3.5 checkpoint folder (config.json, safetensors, tokenizer, preprocessor)"),
  resident: doc(z.boolean().default(true), "keep the trainer's rank processes (and the base model on the GPUs) alive between rounds; false = start `rlloop train ppo` per round (pays the model load every round). Ignored when `trainer.command` is set"),
  command: doc(z.array(z.string()).min(1).nullable().default(null), "a custom per-round trainer command instead of rlloop's own, e.g. the seed: `[\"python\", \"bt_train.py\", \"ppo\"]`. It gets the seed's flags (`--data --adapter --ref --out --epochs --lr --batch --accumulation --seed`) and `trainer.extraArgs`, runs with the round folder as working directory, and must write the adapter and `stats.json` into `--out`"),
  extraArgs: doc(z.array(z.string()).default([]), "arguments appended to `trainer.command` (only with it)"),
  device: doc(DeviceKind.nullable().default(null), "cuda or cpu; null = cuda when a GPU is visible"),
  dtype: doc(DType.nullable().default(null), "compute dtype of the base model; null = bfloat16 on cuda, float32 on cpu"),
  gpus: doc(positiveInt().nullable().default(null), "rank processes, one per GPU; null = every GPU `trainer.env`'s CUDA_VISIBLE_DEVICES (or the host) shows, 1 on cpu"),
  checkpointing: doc(Checkpointing.default("auto"), "activation checkpointing per decoder layer"),
  tf32: doc(Tf32.default("auto"), "TF32 for the float32 matrix products on CUDA (the delta rule's chunks); auto = on for bfloat16, off for float32"),
  attention: doc(Attention.default("flash"), "attention backend on CUDA: `flash` (PyTorch's flash / memory-efficient kernels) or `cudnn`"),
  epochs: doc(positiveInt().default(2), "passes over a round's rows"),
  lr: doc(z.number().positive().default(3e-6), "learning rate (constant, as the seed's PPO)"),
  batch: doc(positiveInt().default(16), "rows per rank per forward"),
  accumulation: doc(positiveInt().default(2), "forwards per optimizer update"),
  prompt: doc(z.string().nullable().default(null), "Jinja template file of the user prompt over name and memory; null = docs/trainer.md's default"),
  tisCap: doc(z.number().positive().nullable().default(null), "truncated importance sampling: weight each row by min(exp(old − vllm_logp), cap); null = off"),
  mismatchStats: doc(z.boolean().default(false), "add sampler/trainer mismatch statistics (k1, k3, ESS) to stats.json (needed by `gate.maxMismatchKl`)"),
  // bounded so that `seed + round` stays an exact integer for every round a loop will reach: an inexact one would fail
  // the job's contract in every round and none of the probe's (seed 0), and poison isolation would blame the rollouts
  seed: doc(nonNegativeInt().max(2 ** 32 - 1).default(0), "round N trains with seed `trainer.seed + N` (recorded in the manifest, so replay repeats it); at most 2^32 - 1"),
  env: doc(z.record(z.string(), z.string()).default({}), "extra environment of the trainer processes (e.g. `CUDA_VISIBLE_DEVICES`); values are never logged"),
  timeoutS: doc(timerSeconds().nullable().default(3600), "a training run (a round, a probe, a part of a round being isolated) past this long is killed and counts as failed (a rank hung on its GPU would otherwise hold the round, and the stream, for ever); far above a round's time by default (256 rows of the 9B model: ~25 s on one H200), raise it for rounds that take longer; null = no limit"),
  startTimeoutS: doc(timerSeconds().default(900), "the resident ranks must have started and loaded the model within this long"),
  probeAtStart: doc(z.boolean().default(true), "train a tiny known-good probe job before the first pull, so a broken trainer stops the start instead of the first round"),
  retryMinS: doc(seconds().default(5), "first wait before retrying a round whose trainer or host failed (doubling up to `trainer.retryMaxS`, for as long as it takes)"),
  retryMaxS: doc(seconds().default(300), "longest wait between such retries"),
});

const Gate = z.strictObject({
  maxLogpGapAbs: doc(threshold().default(null), "reject the adapter when stats `logp_gap_abs` exceeds this"),
  maxKl: doc(threshold().default(null), "… when `kl` (to the reference adapter) exceeds this"),
  maxClipFrac: doc(threshold().default(null), "… when `clip_frac` exceeds this"),
  maxMismatchKl: doc(threshold().default(null), "… when `mismatch.k3` (sampler/trainer mismatch KL; needs `trainer.mismatchStats`) exceeds this"),
  maxRolloutLogpGapAbs: doc(threshold().default(10), "when a round fails `gate.maxLogpGapAbs` or `gate.maxMismatchKl`: a rollout whose gap (the mean over its steps of |Σ old − vllm_logp|, nats; the trainer's `logp_gaps.json`) is above its round's median by more than this, while fewer than half of its round's rollouts are (or half are, and the other half's gaps are within this), is rejected (`logp_mismatch`) and the round trained again without it — one rollout's wrong `vllm_logp` must not fail its round's gate. A round whose gaps are shifted as a whole singles no rollout out: its gate judges it; null = off"),
});

// issue 23: the live-outcome guard (src/loop/guard.ts; docs/daemon.md "The live-outcome guard")
const Guard = z.strictObject({
  enabled: doc(z.boolean().default(false), "roll back when the serving lineage does worse on the robots than an earlier adapter (needs `guard.rewardRange`). false: the live outcomes and the guard's verdict are still computed and reported (stats, `rounds`, metrics) when a range is set, but nothing is rolled back"),
  rewardRange: doc(Range.nullable().default(null), "the range episode rewards lie in, `{\"min\", \"max\"}`: the guard's error rate holds for rewards bounded by it (a reward outside counts at the nearest bound and in `clipped`). null: no confidence sequences, no verdict"),
  alpha: doc(z.number().gt(0).lt(0.5).default(0.05), "false-rollback rate: an adapter whose true mean reward is within `guard.minEffect` of the best of its `guard.baselines` ancestors is rolled back with probability at most this, however often the guard looks"),
  minEffect: doc(z.number().min(0).default(0.05), "the smallest drop of the mean episode reward (reward units) that counts as a regression: the guard rolls back only when it is confident the drop is larger"),
  baselines: doc(positiveInt().max(8).default(3), "compare the adapter under test with its nearest this many ancestors (predecessor, grandparent, …) and roll back to the best; their adapters and optimizer states are kept in the object store (this + 2 adapters)"),
  minRollouts: doc(positiveInt().default(16), "rollouts an adapter needs before the guard tests it or compares against it"),
  pairByGroup: doc(z.boolean().default(true), "also compare per `group` (same scenario / start state) when rollouts of both adapters share groups, which removes the scenario noise; the error rate is split evenly between the paired and the unpaired test"),
  maxGroups: doc(positiveInt().max(4096).default(256), "groups per adapter kept for pairing (the newest), in the state record — one message: (`guard.baselines` + 3) × this × 48 bytes and ~128 KiB besides must fit the server's max_payload (1 MiB by default; checked at start)"),
  successThreshold: doc(z.number().nullable().default(null), "a rollout with reward ≥ this is a success: each adapter's success rate is reported; null = no success rate"),
});

const Intake = z.strictObject({
  dedupRounds: doc(positiveInt().default(64), "committed rounds whose stream sequences the daemon keeps in memory (a redelivery of a committed rollout is acked as applied)"),
  duplicateWindowS: doc(seconds().default(3 * 86400), "how long a consumed rollout id is remembered (KV bucket `rlloop-ids`, kept across restarts): a later rollout with the same id under another stream sequence is rejected (`duplicate_id`). About 200 bytes of JetStream storage per rollout over the window"),
  maxDeliveries: doc(positiveInt().default(100), "a message whose judgement fails for a transient reason (retried with a backoff from 5 s to 5 min) after it was delivered more than this many times, and 3 times in a row in this daemon, is rejected as `undeliverable` with its last error while the rollouts waiting hold the stream (the consumer at its max_ack_pending, others behind); short of it, the message waits (until it would leave the stream: `stream.maxAgeS`). One that judges fine is admitted however often it was delivered"),
});

const Ui = z.strictObject({
  enabled: doc(z.boolean().default(false), "serve the web dashboard (`rlloop ui`'s page) on the metrics endpoint"),
  path: doc(z.string().regex(/^\/([^?#]*\/)?$/, { error: "must start and end with /" }).default("/ui/"), "where the page lives on that endpoint"),
  token: doc(z.string().min(8).nullable().default(null), "require this token (open the page as <path>?token=…); null = none, which is refused unless metricsHost is loopback (redacted in logs)"),
});

const Retention = z.strictObject({
  rounds: doc(positiveInt().nullable().default(32), "committed rounds kept whole after the last one (frames/, train.jsonl, rollouts.jsonl, the adapter with its optimizer state); an older round keeps its manifest.json, and its adapter only while the state record names it (the one served, the lineage a rollback can go back to) — its other files go from this disk, and its adapter from `rlloop-adapters` (its manifest object stays). A 9B adapter with its optimizer state is ~0.5 GB a round. `rlloop replay --train` of a round needs its parent adapter on this disk. null = keep everything (the disk and the object store grow for ever)"),
});

const Lease = z.strictObject({
  ttlS: doc(seconds().min(3, { error: "must be at least 3 s (it is renewed every third of it)" }).default(15), "the active daemon's lease of the policy (KV `rlloop`, key `<policy>.lease`) expires this long after its last renewal (every third of it); a standby takes over that long after the active one stopped renewing"),
  standby: doc(z.boolean().default(false), "start as a standby (`rlloop daemon --standby`): check everything, start the trainer, then wait for the lease and take over from the state kept in NATS. false: a lease held by a daemon elsewhere ends the start"),
});

const Observe = z.strictObject({
  statsIntervalS: doc(seconds().default(10), "period of the stats event on `rlloop.<policy>.stats`"),
  metricsPort: doc(nonNegativeInt().max(65535).nullable().default(9464), "port of `/metrics` (Prometheus), `/livez`, `/readyz` (alias `/healthz`) and the web dashboard; 0 = a free port (logged); null = off"),
  metricsHost: doc(z.string().default("127.0.0.1"), "listen address of that endpoint"),
  ui: doc(Ui.prefault({}), "the web dashboard on the metrics endpoint"),
});

const Log = z.strictObject({
  level: doc(z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"), "pino level: fatal, error, warn, info, debug, trace, silent"),
});

/** Sections in documentation order, each with its heading. */
export const SECTIONS = {
  policy: { schema: Policy, title: "the policy this daemon trains" },
  nats: { schema: Nats, title: "connection, or the daemon's own server" },
  stream: { schema: Stream, title: "the JetStream streams the daemon owns (created, and updated when these change)" },
  consumer: { schema: Consumer, title: "the durable pull consumer `rlloop-<policy>`" },
  frames: { schema: Frames, title: "where frames may come from and how big they may be" },
  limits: { schema: Limits, title: "what a rollout may hold (every event is judged in bounded time and memory)" },
  round: { schema: Round, title: "when a round closes" },
  offPolicy: { schema: OffPolicy, title: "how old the serving adapter may be" },
  advantage: { schema: Advantage, title: "estimator (src/loop/advantages.ts)" },
  adapter: { schema: Adapter, title: "where the loop starts" },
  trainer: { schema: Trainer, title: "how a round is trained" },
  gate: { schema: Gate, title: "health gate before publishing (null = off)" },
  guard: { schema: Guard, title: "the live-outcome guard: roll back an adapter that does worse on the robots" },
  intake: { schema: Intake, title: "duplicates and redeliveries" },
  retention: { schema: Retention, title: "what old rounds keep, on this disk and in the object store" },
  lease: { schema: Lease, title: "one active daemon per policy, standbys wait" },
  observe: { schema: Observe, title: "stats, metrics and health" },
  log: { schema: Log, title: "logging" },
} as const;

export const ConfigSchema = z.strictObject({
  $schema: doc(z.string().optional(), "the JSON Schema of this file (schema/config.schema.json), for editors; ignored"),
  workDir: doc(z.string().default("runs"), "where the daemon keeps its files: `rounds/<policy>/<round:06d>/` (train.jsonl, frames/, manifest.json, adapter/; older rounds pruned: `retention`), `rounds/<policy>/incoming/` (frames of rollouts not yet in a round), `nats/` (store of its own nats-server), `probe/`, `replay/`, `daemon.lock`"),
  policy: Policy.prefault({}),
  nats: Nats.prefault({}),
  stream: Stream.prefault({}),
  consumer: Consumer.prefault({}),
  frames: Frames.prefault({}),
  limits: Limits.prefault({}),
  round: Round.prefault({}),
  offPolicy: OffPolicy.prefault({}),
  advantage: Advantage.prefault({}),
  adapter: Adapter.prefault({}),
  trainer: Trainer.prefault({}),
  gate: Gate.prefault({}),
  guard: Guard.prefault({}).refine((g) => !g.enabled || g.rewardRange !== null, { error: "must be set when guard.enabled is true (the guard's error rate holds only for rewards in a stated range)", path: ["rewardRange"] })
    .refine((g) => g.rewardRange === null || g.rewardRange.max > g.rewardRange.min, { error: "must have max > min", path: ["rewardRange"] }),
  intake: Intake.prefault({}),
  retention: Retention.prefault({}),
  lease: Lease.prefault({}),
  observe: Observe.prefault({}),
  log: Log.prefault({}),
}).meta({ title: "rlloop daemon configuration", description: "rlloop daemon --config FILE; every field is optional (config/README.md)" });

export type Config = z.output<typeof ConfigSchema>;
export type ConfigInput = z.input<typeof ConfigSchema>;
export type AdvantageConfig = Config["advantage"];
export type TrainerConfig = Config["trainer"];
export type LimitsConfig = Config["limits"];
export type GuardConfig = Config["guard"];
