"""Where the GPU time goes, from a Kineto trace written by the native module (RLLOOP_PROFILE_TRACE, see
native/src/diagnostics/profiler.h).

Every GPU kernel is attributed to the CPU op that launched it, and that op to the named ranges around it on its
thread: the model's annotations (vision, layer.linear_attention, gdn.core, mlp, lm_head, backward, optimizer) and,
in the backward pass, the autograd node being evaluated (a recomputed checkpointed layer shows its forward
annotations inside the node LayerCheckpointBackward). Prints GPU busy time against the span of the window, then
the time by phase, by backward node and by kernel, then where the GPU waited on the host (idle gaps, the longest
CUDA runtime calls: a process's first forward shows its first-use costs there).

Usage: python3 profile_report.py TRACE.json [--top N] [--json OUT.json]
"""
import argparse
import bisect
import collections
import json

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
BACKWARD_NODE = "autograd::engine::evaluate_function: "


def union_length(intervals):
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def scope_stacks(events):
    """For every cpu_op (by External id): the names of the annotations and backward nodes enclosing it."""
    by_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in ("cpu_op", "user_annotation"):
            continue
        by_thread[(e.get("pid"), e.get("tid"))].append(e)
    stacks = {}
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
        open_scopes = []  # (end, name)
        for e in evs:
            while open_scopes and open_scopes[-1][0] < e["ts"]:
                open_scopes.pop()
            name = e["name"]
            ext = e.get("args", {}).get("External id")
            if e["cat"] == "cpu_op" and ext is not None:
                stacks[ext] = [n for _, n in open_scopes]
            if e["cat"] == "user_annotation" or name.startswith(BACKWARD_NODE):
                open_scopes.append((e["ts"] + e.get("dur", 0), name))
    return stacks


def phase_of(stack):
    nodes = [n[len(BACKWARD_NODE):] for n in stack if n.startswith(BACKWARD_NODE)]
    notes = [n for n in stack if not n.startswith(BACKWARD_NODE)]
    if not nodes:
        return "fwd " + ">".join(notes) if notes else "fwd (unannotated)", None
    inner = [n for n in notes if n not in ("backward",)]
    recompute = "LayerCheckpoint" in nodes[0]
    kind = "bwd recompute" if recompute and len(nodes) == 1 else "bwd"
    # the annotations inside a backward node are those of a recomputed forward
    return (kind + " " + ">".join(inner)).strip() if inner else kind, nodes[-1]


def short(name, width=100):
    return name if len(name) <= width else name[: width - 3] + "..."


def print_stalls(events, kernels, gap_us=3000, top=12):
    """Where the GPU waited on the host: idle gaps between kernels, and the CUDA runtime calls that took longest with
    the op that made them (in a process's first forward: a kernel's first launch loading its module, CUDA's lazy
    loading, and libraries' first use, tens of ms each)."""
    ops = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and "External id" in e.get("args", {}):
            ops.setdefault(e["args"]["External id"], e["name"])
    ordered = sorted(kernels, key=lambda k: k["ts"])
    gaps = [(b["ts"] - (a["ts"] + a["dur"]), b["name"]) for a, b in zip(ordered, ordered[1:])]
    print(f"\nGPU idle between kernels, by gap length (µs): count, ms in all; then the ops whose kernels waited\n"
          f"longest in gaps of 0.1-{gap_us / 1e3:.0f} ms (the longer gaps are listed one by one below)")
    edges = [0, 10, 100, 1000, gap_us, float("inf")]
    for lo, hi in zip(edges, edges[1:]):
        inside = [g for g in gaps if lo < g[0] <= hi]
        print(f"  {lo:>6.0f}-{hi:<6.0f} {len(inside):6d} {sum(g for g, _ in inside) / 1e3:9.1f}")
    stalls = collections.Counter()
    for (g, _), b in zip(gaps, ordered[1:]):  # the gap waited for b's launch
        if 100 < g <= gap_us:
            stalls[ops.get(b.get("args", {}).get("External id"), b["name"])] += g
    for name, g in stalls.most_common(8):
        print(f"  {g / 1e3:9.1f} ms before {short(name, 90)}")
    gaps = sorted((g for g in gaps if g[0] > gap_us), reverse=True)
    print(f"\nGPU idle gaps over {gap_us / 1e3:.0f} ms: {len(gaps)}, {sum(g for g, _ in gaps) / 1e3:.1f} ms in all")
    for g, name in gaps[:top]:
        print(f"  {g / 1e3:9.1f}  before {short(name, 90)}")
    calls = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"), key=lambda e: -e["dur"])
    print("\nlongest CUDA runtime calls (ms, call, the op that made it)")
    for e in calls[:top]:
        print(f"  {e['dur'] / 1e3:9.1f}  {e['name']:24s} {ops.get(e.get('args', {}).get('External id'), '?')}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--json")
    args = ap.parse_args()
    events = json.load(open(args.trace))["traceEvents"]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES]
    if not kernels:
        raise SystemExit("no GPU events in the trace (a CPU-only build, or the window missed the GPU work)")
    stacks = scope_stacks(events)
    span = max(k["ts"] + k["dur"] for k in kernels) - min(k["ts"] for k in kernels)
    busy = union_length([(k["ts"], k["ts"] + k["dur"]) for k in kernels])
    total = sum(k["dur"] for k in kernels)

    by_phase, by_node, by_kernel = collections.Counter(), collections.Counter(), collections.Counter()
    counts = collections.Counter()
    for k in kernels:
        stack = stacks.get(k.get("args", {}).get("External id"), [])
        phase, node = phase_of(stack)
        by_phase[phase] += k["dur"]
        if node:
            by_node[node] += k["dur"]
        by_kernel[k["name"]] += k["dur"]
        counts[k["name"]] += 1

    print(f"window {span / 1e3:.1f} ms, GPU busy {busy / 1e3:.1f} ms ({100 * busy / span:.0f}%), "
          f"{len(kernels)} kernels, {total / 1e3:.1f} ms of kernel time")
    for title, table in (("by phase", by_phase), ("by backward node", by_node)):
        print(f"\n{title} (ms, % of kernel time)")
        for name, us in table.most_common(args.top):
            print(f"  {us / 1e3:9.1f}  {100 * us / total:5.1f}%  {name}")
    print("\nby kernel (ms, %, launches)")
    for name, us in by_kernel.most_common(args.top):
        print(f"  {us / 1e3:9.1f}  {100 * us / total:5.1f}%  {counts[name]:6d}  {short(name)}")
    print_stalls(events, kernels)
    if args.json:
        json.dump({"span_ms": span / 1e3, "busy_ms": busy / 1e3, "kernel_ms": total / 1e3,
                   "by_phase": {k: v / 1e3 for k, v in by_phase.items()},
                   "by_node": {k: v / 1e3 for k, v in by_node.items()},
                   "by_kernel": {k: [v / 1e3, counts[k]] for k, v in by_kernel.most_common(200)}},
                  open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
