"""Reads a trace of `tq_cli answer --profile TRACE.json` and says where each call's time went:

    python3 bench/gpu/kernel_profile.py TRACE.json [--layers N] [--top 15] [--json OUT.json]

Per call (the user scope "tq_cli call N" that tq_cli puts around each):
- the kernels ranked by GPU time (copies and fills among them), with their count, and their count per layer
  where --layers is given;
- GPU busy time (the union of its kernels' and copies' intervals) against the call's wall time;
- the GPU's idle gaps: before its first kernel (the host's preparation), between kernels (launches the GPU waited
  for; the shorter ones, up to GAP_US, apart: one kernel's start after another's end, inside a graph too), after its
  last (the readout's return to the host);
- GPU time inside CUDA graphs (kernels launched by cudaGraphLaunch) and outside them;
- what the profiler itself took on the host inside the call (its "overhead" events: the first CUDA activity's
  buffer request took 1.9 ms of a warm call's 2.2 ms before its first kernel in the second window), and the host's
  time in cudaGraphLaunch (which the profiler inflates too, tracing every node): read the gaps net of them;
- the attention kernels' grids (FlashAttention-2 launches a block per 128 rows of a tier's longest sequence, sequence
  and head, empty ones included: docs/gpu.md, "The fixed form's grids"), each grid's launches and their median time.
A trace with no GPU activity (the CPU, or a libtorch without Kineto) ranks the CPU ops by self time instead.
(Not named profile.py: for this folder's scripts it would shadow the standard library's profile, which cProfile imports.)
"""
import argparse
import json
import re
import statistics
import sys
from collections import defaultdict

CALL = re.compile(r"^tq_cli call (\d+)$")
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}
GAP_US = 5.0  # an idle gap between GPU activities counted as one (shorter ones are the launch's own latency)
ATTENTION = re.compile(r"flash|split_key|fmha|attention", re.IGNORECASE)


def short_name(name):
    """A kernel's name without its return type, parameters and template arguments: the instances of one template
    counted together, and a name that fits a table's row."""
    name = re.sub(r"^void ", "", name)
    if name.endswith(")"):  # the parameter list: from the "(" that closes last, not "(anonymous namespace)"
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i]
                break
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<…>")
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)[:100]


def union_length(intervals):
    total, end = 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def events_of(trace):
    return [e for e in trace.get("traceEvents", []) if e.get("ph") == "X" and "ts" in e]


def category(e):
    return str(e.get("cat", "")).lower()


def calls_of(events):
    """The calls' windows: {call number: (start µs, end µs)}."""
    calls = {}
    for e in events:
        m = CALL.match(e.get("name", ""))
        if m and category(e) == "user_annotation":
            calls[int(m.group(1))] = (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
    return dict(sorted(calls.items()))


def inside(window, ts):
    return window[0] <= ts <= window[1]


def attention_grids(gpu):
    """The attention kernels' launches by kernel, grid and block: how many, and their median time."""
    by_grid = defaultdict(list)
    for e in gpu:
        if category(e) == "kernel" and ATTENTION.search(e["name"]):
            a = e.get("args", {})
            by_grid[(short_name(e["name"]), tuple(a.get("grid", [])), tuple(a.get("block", [])))].append(float(e["dur"]))
    return [{"name": name, "grid": list(grid), "block": list(block), "count": len(times), "median_us": round(statistics.median(times), 2)}
            for (name, grid, block), times in sorted(by_grid.items(), key=lambda kv: -sum(kv[1]))]


def gpu_summary(window, gpu, launches, layers, top, overhead=()):
    """One call's GPU figures. gpu: its kernels, copies and fills; launches: correlation id -> the runtime call;
    overhead: the profiler's own events inside the call."""
    intervals = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in gpu]
    busy = union_length(intervals)
    wall = window[1] - window[0]
    by_name = defaultdict(lambda: {"us": 0.0, "count": 0})
    in_graphs = 0.0
    for e in gpu:
        row = by_name[short_name(e["name"])]
        row["us"] += float(e["dur"])
        row["count"] += 1
        launch = launches.get(e.get("args", {}).get("correlation"))
        if (launch and launch.get("name") == "cudaGraphLaunch") or "graph node id" in e.get("args", {}):
            in_graphs += float(e["dur"])
    total = sum(r["us"] for r in by_name.values()) or 1.0
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1]["us"])
    kernels = [{"name": name, "us": round(r["us"], 1), "count": r["count"], "share": r["us"] / total,
                **({"per_layer": r["count"] / layers} if layers else {})} for name, r in ranked]
    ordered = sorted(intervals)
    gaps, short, end = [], [], None
    for start, stop in ordered:
        if end is not None and start - end > GAP_US:
            gaps.append(start - end)
        elif end is not None and start > end:
            short.append(start - end)
        end = stop if end is None else max(end, stop)
    return {
        "wall_us": wall, "gpu_busy_us": busy, "gpu_busy_share": busy / wall if wall else 0.0,
        "gpu_time_us": total, "kernels_launched": len(gpu), "distinct_kernels": len(by_name),
        "idle_before_first_us": (ordered[0][0] - window[0]) if ordered else wall,
        "idle_after_last_us": (window[1] - end) if ordered else 0.0,
        "gaps_between": {"count": len(gaps), "total_us": sum(gaps), "largest_us": max(gaps, default=0.0)},
        "short_gaps": {"count": len(short), "total_us": sum(short)},
        "in_graphs_us": in_graphs, "outside_graphs_us": total - in_graphs,
        "launch_calls": sum(1 for launch in launches.values() if inside(window, float(launch["ts"]))),
        "profiler_overhead_us": sum(float(e["dur"]) for e in overhead),
        "graph_launch_host_us": sum(float(launch["dur"]) for launch in launches.values()
                                    if launch.get("name") == "cudaGraphLaunch" and inside(window, float(launch["ts"]))),
        "top": kernels[:top],
        "attention_grids": attention_grids(gpu),
    }


def cpu_summary(window, ops, top):
    """One call's CPU ops ranked by self time (their time less that of the ops they called, on the same thread)."""
    by_thread = defaultdict(list)
    for e in ops:
        by_thread[e.get("tid")].append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"]))
    self_us = defaultdict(lambda: {"us": 0.0, "count": 0})
    for spans in by_thread.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []  # [start, end, name, children's time]
        def close(until):
            while stack and stack[-1][1] <= until:
                start, stop, name, children = stack.pop()
                self_us[name]["us"] += (stop - start) - children
                self_us[name]["count"] += 1
                if stack:
                    stack[-1][3] += stop - start
        for start, stop, name in spans:
            close(start)
            stack.append([start, stop, name, 0.0])
        close(float("inf"))
    total = sum(r["us"] for r in self_us.values()) or 1.0
    ranked = sorted(self_us.items(), key=lambda kv: -kv[1]["us"])
    return {"wall_us": window[1] - window[0], "cpu_op_self_us": total,
            "top": [{"name": n, "us": round(r["us"], 1), "count": r["count"], "share": r["us"] / total} for n, r in ranked[:top]]}


def summarize(trace, layers=None, top=15):
    events = events_of(trace)
    calls = calls_of(events)
    if not calls:
        raise ValueError("no 'tq_cli call N' scope in the trace: not written by tq_cli answer --profile")
    gpu = [e for e in events if category(e) in GPU_CATEGORIES]
    launches = {e.get("args", {}).get("correlation"): e for e in events if category(e) in LAUNCH_CATEGORIES}
    ops = [e for e in events if category(e) == "cpu_op"]
    out = {"device": "cuda" if gpu else "cpu", "layers": layers, "calls": {}}
    for number, window in calls.items():
        if gpu:
            def belongs(e):
                launch = launches.get(e.get("args", {}).get("correlation"))
                return inside(window, float(launch["ts"]) if launch else float(e["ts"]))
            overhead = [e for e in events if category(e) == "overhead" and inside(window, float(e["ts"]))]
            out["calls"][number] = gpu_summary(window, [e for e in gpu if belongs(e)], launches, layers, top, overhead)
        else:
            out["calls"][number] = cpu_summary(window, [e for e in ops if inside(window, float(e["ts"]))], top)
    return out


def markdown(summary, title="profile"):
    lines = [f"## {title}", ""]
    for number, c in summary["calls"].items():
        ms = lambda us: f"{us / 1000:.3f} ms"  # noqa: E731
        if summary["device"] == "cuda":
            g = c["gaps_between"]
            lines += [f"call {number}: wall {ms(c['wall_us'])}, GPU busy {ms(c['gpu_busy_us'])} ({100 * c['gpu_busy_share']:.0f}%), "
                      f"{c['kernels_launched']} kernels and copies ({c['distinct_kernels']} distinct) from {c['launch_calls']} launch calls; "
                      f"GPU idle before the first {ms(c['idle_before_first_us'])}, between ({g['count']} gaps over {GAP_US:.0f} µs) "
                      f"{ms(g['total_us'])} (largest {ms(g['largest_us'])}) and {c['short_gaps']['count']} shorter ones "
                      f"{ms(c['short_gaps']['total_us'])} in all, after the last {ms(c['idle_after_last_us'])}; "
                      f"in CUDA graphs {ms(c['in_graphs_us'])}, outside {ms(c['outside_graphs_us'])}; the profiler's own "
                      f"{ms(c['profiler_overhead_us'])}, the host in cudaGraphLaunch {ms(c['graph_launch_host_us'])}", "",
                      "| kernel | GPU time | share | count" + (" | per layer" if summary["layers"] else "") + " |",
                      "|---|---|---|---" + ("|---" if summary["layers"] else "") + "|"]
            for k in c["top"]:
                lines.append(f"| `{k['name']}` | {k['us']:.1f} µs | {100 * k['share']:.1f}% | {k['count']}" +
                             (f" | {k['per_layer']:.2f}" if summary["layers"] else "") + " |")
            if c["attention_grids"]:
                lines += ["", "| attention kernel | grid | block | launches | median |", "|---|---|---|---|---|"]
                lines += [f"| `{g['name']}` | {' x '.join(map(str, g['grid']))} | {' x '.join(map(str, g['block']))} | {g['count']} | "
                          f"{g['median_us']:.1f} µs |" for g in c["attention_grids"]]
        else:
            lines += [f"call {number}: wall {ms(c['wall_us'])}, CPU ops' self time {ms(c['cpu_op_self_us'])}", "",
                      "| CPU op | self time | share | count |", "|---|---|---|---|"]
            lines += [f"| `{k['name']}` | {k['us']:.1f} µs | {100 * k['share']:.1f}% | {k['count']} |" for k in c["top"]]
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--layers", type=int, help="the model's layers: each kernel's count per layer")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--json", help="also write the summary here")
    args = parser.parse_args()
    with open(args.trace) as f:
        try:
            summary = summarize(json.load(f), args.layers, args.top)
        except ValueError as e:
            sys.exit(f"kernel_profile.py: {args.trace}: {e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    print(markdown(summary, args.trace))


if __name__ == "__main__":
    sys.exit(main())
