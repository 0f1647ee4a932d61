"""Where a one-shot PPO round's time went, one line per rlloop log (pino JSON from `rlloop train ppo`): the round
(job start → job done) and its peak, the model's load and readiness and the warm-up beside it, the time before the
frozen pass (rows, adapters), the frozen pass (its wait for data and its first batch's collation and preparation,
when its first batch ended after the job's start, its second and third batches: the first of 2·batch rows pays
the first-use costs of the larger shapes), the epochs with their data waits, the saving, and logp_gap (equal
frozen log-probs give equal gaps). What bench/RESULTS.md's phase tables are read from; printed by ab_rlloop.sh
after every run, so a device call's output holds them without fetching the logs.
Usage: python3 round_phases.py LOG...
"""
import json
import re
import sys
from datetime import datetime
from pathlib import Path


def entries(log: Path):
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                pass


def seconds_of(entry) -> float:
    """A pino line's time in seconds (ISO text as rlloop logs it, or epoch milliseconds)."""
    t = entry["time"]
    return t / 1000 if isinstance(t, (int, float)) else datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()


def phases(log: Path) -> dict:
    got, frozen_steps, job_start = {}, {}, None
    for e in entries(log):
        msg = e.get("msg", "")
        if msg == "model loaded":
            got["load/ready"] = f"{e.get('loadS', 0):.2f}/{e.get('readyS', 0):.2f}"
        elif msg == "warm-up done":
            got["warm-up"] = e.get("seconds")
        elif msg == "job start":
            job_start = seconds_of(e)
        elif msg == "ppo start":
            p = e.get("phasesS", {})
            got["rows,adapters"] = f"{p.get('rows', 0):.2f},{p.get('adapters', 0):.2f}"
        elif e.get("phase") == "ppo fixed log-probs":
            frozen_steps[e["step"]] = seconds_of(e)
        elif msg == "ppo fixed log-probs":
            first = e.get("firstBatchS") or {}
            got["frozen"] = f"{e['seconds']:.2f} (wait {e.get('dataWaitS', 0):.2f}" + \
                            (f"; first {first['collateS']}+{first['prepareS']}" if "collateS" in first else "") + \
                            f"; collated early {e.get('collatedEarly', 1 if first.get('collatedEarly') else 0)})"
        elif re.fullmatch(r"ppo epoch \d+", msg):
            got[f"epoch {e['epoch']}"] = f"{e['seconds']:.2f} (wait {e.get('dataWaitS', 0):.2f})"
        elif msg == "ppo saved":
            got["saving"] = e.get("seconds")
        elif msg == "job done":
            got["round"] = round(e["seconds"], 2)
            got["peak GiB"] = round(e.get("peakGpuGiB", 0), 1)
        elif msg == "ppo done":
            got["logp_gap"] = (e.get("result") or {}).get("stats", {}).get("logp_gap")
    if job_start is not None and 1 in frozen_steps:
        got["batch 1 ends"] = round(frozen_steps[1] - job_start, 2)
        got["batches 2,3"] = ",".join(f"{frozen_steps[k] - frozen_steps[k - 1]:.3f}" for k in (2, 3) if k in frozen_steps and k - 1 in frozen_steps)
    return got


# the phases in the order they happen (a log holds them in the order they were logged)
ORDER = ["round", "peak GiB", "load/ready", "warm-up", "rows,adapters", "frozen", "batch 1 ends", "batches 2,3", "epoch 1",
         "epoch 2", "saving", "logp_gap"]


if __name__ == "__main__":
    for path in sys.argv[1:]:
        if not Path(path).is_file():
            print(f"{Path(path).name}: no log (the run failed before it wrote one)")
            continue
        got = phases(Path(path))
        print(Path(path).name + ": " + "; ".join(f"{k} {got[k]}" for k in ORDER if k in got))
