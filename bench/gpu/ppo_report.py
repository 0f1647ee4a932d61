"""Reads the logs ppo_bench.sh writes under OUT and prints the side-by-side table: wall time of the round after
the model is loaded, rows/s, peak GPU memory, and the ratio seed / rlloop; also writes OUT/RESULTS-section.md, the
same table in Markdown with the exact command and the machine, ready for bench/RESULTS.md (the GPU machine cannot
write into the host's checkout: the file comes back with $OUT).
rlloop: from its "job start" log line (model loaded) to "job done" (pino JSON); seed: seed_timed.py's SEED_TIMING;
resident rounds: resident_rounds.mjs's round events (round start → adapter written, rows named "rlloop-resident-
r<N>-ppo"). ppo_bench.sh runs this after every entry, so a call cut short still leaves the table of what finished.
Usage: python3 ppo_report.py OUT ROWS [COMMAND]
"""
import json
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path


def rlloop_time(log: Path):
    start = end = None
    peak = None
    for line in log.read_text().splitlines():
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        if entry.get("msg") == "job start":
            start = datetime.fromisoformat(entry["time"].replace("Z", "+00:00")).timestamp()
        if entry.get("msg") == "job done":
            end = datetime.fromisoformat(entry["time"].replace("Z", "+00:00")).timestamp()
            peak = entry.get("peakGpuGiB")
    return None if start is None or end is None else (end - start, peak)


def seed_time(log: Path):
    for line in log.read_text().splitlines():
        if line.startswith("SEED_TIMING "):
            t = json.loads(line.split(" ", 1)[1])
            return t["after_load_s"], t["peak_gib"]
    return None


# transformers' warning when it runs its torch fallback of the delta rule (hub_kernels.py names the function): a
# "seed-fla" run that printed it did not use flash-linear-attention (seen: a carried Triton that failed to import)
# and is no FLA baseline. The same warning for `causal_conv1d_fn` is expected (causal-conv1d is a CUDA extension
# with no wheel to carry) and does not disqualify a run.
FLA_FALLBACK = "`chunk_gated_delta_rule` is falling back to its reference PyTorch implementation"


def seed_fla_time(log: Path):
    if FLA_FALLBACK in log.read_text():
        print(f"{log.name}: transformers fell back to its torch delta rule: flash-linear-attention was not used; left out")
        return None
    return seed_time(log)


def resident_rounds(log: Path):
    """{"rlloop-resident-r1-ppo": (seconds, peak GiB), ...} from the round events of resident_rounds.mjs."""
    rounds = {}
    for line in log.read_text().splitlines():
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        if entry.get("event") == "round":
            peak = entry.get("stats", {}).get("gpu_memory_bytes")
            rounds[f"rlloop-resident-r{entry['round']}-ppo"] = (entry["seconds"], None if peak is None else peak / 2**30)
    return rounds


def main():
    out, rows = Path(sys.argv[1]), int(sys.argv[2])
    table = {}
    for name, reader in (("rlloop-ppo", rlloop_time), ("rlloop-nockpt-ppo", rlloop_time), ("seed-ppo", seed_time), ("seed-fla-ppo", seed_fla_time),
                         ("rlloop-sft", rlloop_time), ("seed-sft", seed_time), ("seed-fla-sft", seed_fla_time)):
        log = out / f"{name}.log"
        if log.exists() and (t := reader(log)):
            table[name] = t
    if (out / "resident.log").exists():
        table.update(resident_rounds(out / "resident.log"))
    print(f"{'run':24} {'seconds':>9} {'rows/s':>8} {'peak GiB':>9}")
    for name, (s, peak) in table.items():
        print(f"{name:24} {s:9.1f} {rows_per_s(name, s, rows):8.2f} {peak if peak is not None else float('nan'):9.1f}")
    for base, mine in ratios(table):
        print(f"ratio {base} / {mine}: {table[base][0] / table[mine][0]:.2f}x")
    (out / "summary.json").write_text(json.dumps(table))
    command = sys.argv[3] if len(sys.argv) > 3 else f"bash bench/gpu/ppo_bench.sh {rows}"
    (out / "RESULTS-section.md").write_text(markdown(table, rows, command))


def ratios(table):
    """(seed run, rlloop run) pairs present in the table: each rlloop PPO/SFT run against each seed run of its mode."""
    pairs = []
    for mode in ("ppo", "sft"):
        for mine in [n for n in table if n.startswith("rlloop") and n.endswith(mode) and "nockpt" not in n]:
            pairs += [(base, mine) for base in (f"seed-{mode}", f"seed-fla-{mode}") if base in table]
    return pairs


def machine():
    """The GPU's name and torch's version, looked up once per machine (importing torch takes seconds, and
    ppo_bench.sh calls this report after every entry); cached outside OUT, whose files come back from the device."""
    cached = Path(tempfile.gettempdir()) / "rlloop-bench-machine.json"
    if cached.exists():
        return json.loads(cached.read_text())
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        gpu = "no nvidia-smi"
    try:
        import torch  # the machine's, for the version line
        version = torch.__version__
    except ImportError:
        version = "?"
    info = {"gpu": gpu, "torch": version}
    cached.write_text(json.dumps(info))
    return info


def rows_per_s(name, seconds, rows):
    """rows × epochs over the timed span (a PPO round runs 2 epochs, an SFT job 1)."""
    return rows * (2 if name.endswith("ppo") else 1) / seconds


def markdown(table, rows, command):
    info = machine()
    gpu, version = info["gpu"], info["torch"]
    lines = [f"Command (GPU machine, repository root): `{command}`. {gpu}, torch {version}, "
             f"{datetime.now(timezone.utc):%Y-%m-%d}, {rows} rows, all runs in this one call.", "",
             "| run | seconds (model loaded → outputs written) | rows/s | peak GPU GiB |", "|---|---|---|---|"]
    for name, (s, peak) in table.items():
        lines.append(f"| {name} | {s:.1f} | {rows_per_s(name, s, rows):.2f} | {'' if peak is None else f'{peak:.1f}'} |")
    for base, mine in ratios(table):
        lines.append(f"\n{base} / {mine}: **{table[base][0] / table[mine][0]:.2f}x**")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
