"""The backward's time by model segment and custom node, from the JSON lines RLLOOP_BACKWARD_TIMELINE writes (one
per backward call; native/src/diagnostics/backward_timeline.h). Prints the mean over the calls after the first `--skip`
(first-use warm-up), in ms per backward, with each segment's share of the total.

Usage: python3 backward_report.py TIMELINE.jsonl [--skip 2]
"""
import argparse
import collections
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("timeline")
    ap.add_argument("--skip", type=int, default=2)
    args = ap.parse_args()
    lines = [json.loads(l) for l in open(args.timeline) if l.strip()]
    kept = lines[args.skip:] or lines
    if not kept:
        raise SystemExit(f"{args.timeline}: no backward calls recorded")
    n = len(kept)
    total = sum(l["total_ms"] for l in kept) / n
    segments, nodes = collections.Counter(), collections.Counter()
    for l in kept:
        segments.update(l["segments"])
        nodes.update(l["nodes"])
    print(f"{n} backward calls ({len(lines) - n} skipped), {total:.1f} ms each on average ({kept[0]['device']})")
    print("\nby segment (ms per backward, % of it; summed over the layers of that kind)")
    for name, ms in segments.most_common():
        print(f"  {ms / n:9.1f}  {100 * ms / n / total:5.1f}%  {name}")
    print("\nof which, custom backward nodes (ms per backward)")
    for name, ms in nodes.most_common():
        print(f"  {ms / n:9.1f}  {100 * ms / n / total:5.1f}%  {name}")


if __name__ == "__main__":
    main()
