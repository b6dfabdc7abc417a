"""Why each kernel of a layer takes its time: Nsight Compute's counters for the first layer of two calls, and the split-key kernel's.

The profile ranks kernels by time; it cannot say whether a kernel is bound by memory, by its arithmetic, or by
latency (too few warps, too little in flight). At 32 states x 1,001 tokens our row kernels take a third of the GPU's
time (qk_norm_rope 17%, add_rms_norm 9%, gated_mul 6%: bench/gpu/results/h200-2026-11-30-profile.md), where moving
their bytes once would take less. So this runs that call, and a cold 1,000-token prefill before it, under `ncu`: our
kernels and the GEMMs and attention beside them (the first KERNELS launches that match), with the counters that say
which limit each meets: its duration, its memory and SM throughput as a share of the device's peak, DRAM's, the warps
it keeps active, its registers and grid; for the split-key kernel also why its warps wait (their stall reasons, how often
a scheduler issues, what bounds its resident blocks). Writes OUT/kernel_counters.{json,md} and ncu's CSV as it came
(kernel_counters-CALL.csv); no build of its own.

    python3 bench/gpu/kernel_counters.py --cli build/tq_cli --models DIR --out OUT [--ncu ncu]
    python3 bench/gpu/kernel_counters.py --parse FILE.csv      (the table from a CSV ncu wrote; CI checks the parser)
    python3 bench/gpu/kernel_counters.py --dry-run --models DIR --bench-model NAME   (the calls it would run; CI's too)
"""
import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = 14  # the first layer's (about 11 launches a layer) and the next layer's first
MATCH = r"regex:tq::cuda|flash_fwd|nvjet|xmma|gemm"
# name in ncu -> our key: each a sum or average over the kernel, as its "Speed of light" section reports them.
METRICS = {
    "gpu__time_duration.sum": "us",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "launch__registers_per_thread": "registers",
    "launch__grid_size": "blocks",
    "launch__block_size": "threads",
}
# Why a kernel waits, asked of the split-key kernel (80 µs a layer where its work comes to a few): what its warps stall
# on (each reason's share of the active warps' cycles, under "stalls"), how often a scheduler issued, and what bounds
# its resident warps. A name this ncu lacks fails the whole run, so that call is run again without them where it fails.
STALL_REASONS = ["long_scoreboard", "short_scoreboard", "barrier", "wait", "mio_throttle", "math_pipe_throttle", "lg_throttle",
                 "not_selected", "no_instruction", "dispatch_stall", "membar", "branch_resolving"]
WHY_METRICS = {
    **{f"smsp__warp_issue_stalled_{r}_per_warp_active.pct": f"stall:{r}" for r in STALL_REASONS},
    "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue_pct",
    "sm__maximum_warps_per_active_cycle_pct": "theoretical_occupancy_pct",
    "launch__occupancy_limit_registers": "blocks_by_registers",
    "launch__occupancy_limit_shared_mem": "blocks_by_shared",
    "launch__occupancy_limit_warps": "blocks_by_warps",
    "smsp__inst_executed.sum": "instructions",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "shared_load_conflicts",
}


def number(text):
    """A metric's value as ncu prints it (thousands separated by commas), or None."""
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return None


def parse(text):
    """ncu --csv's rows (one per kernel and metric) into one entry per kernel launch, in launch order."""
    text = text[text.index('"ID"'):] if '"ID"' in text else text
    # ncu's own lines (==PROF==, ==WARNING==) may come between the rows.
    rows = list(csv.DictReader(io.StringIO("\n".join(line for line in text.splitlines() if not line.startswith("==")))))
    launches = {}
    for row in rows:
        entry = launches.setdefault(row["ID"], {"kernel": row["Kernel Name"]})
        key = METRICS.get(row["Metric Name"]) or WHY_METRICS.get(row["Metric Name"])
        if key is None:
            continue
        value = number(row["Metric Value"])
        if key.startswith("stall:"):
            entry.setdefault("stalls", {})[key[len("stall:"):]] = value
            continue
        # Durations come in the unit ncu picks (ns, us, ms): ours is µs.
        scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(row.get("Metric Unit", ""), 1.0)
        entry[key] = value * scale if key == "us" and value is not None else value
    return [launches[k] for k in sorted(launches, key=int)]


def short_name(kernel):
    """A demangled kernel name without its return type, namespaces and parameters; its template arguments where short
    (our few-row GEMM's tilings, split-key's dtype and pieces), else <…>. `tq::cuda::(anonymous namespace)::f(Args)` was
    cut at its first parenthesis, the anonymous namespace's, leaving no name."""
    k = kernel.replace("(anonymous namespace)::", "").split("(")[0]
    k = k[len("void "):] if k.startswith("void ") else k
    base, angle, template = k.partition("<")
    return base.split("::")[-1] + (("<" + template if len(template) <= 24 else "<…>") if angle else "")


def top_stalls(entry, n=3):
    """The `n` reasons its warps stalled on most, largest first, as "reason pct%"."""
    stalls = sorted(((v, r) for r, v in entry.get("stalls", {}).items() if v is not None), reverse=True)[:n]
    return ", ".join(f"{r} {v:.0f}%" for v, r in stalls)


def markdown(launches):
    lines = ["| # | kernel | µs | memory % | SM % | DRAM % | warps active % | registers | blocks x threads |", "|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda v, d=1: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
    for i, e in enumerate(launches):
        name = short_name(e["kernel"])[:70]
        lines.append(f"| {i} | `{name}` | {fmt(e.get('us'))} | {fmt(e.get('memory_pct'))} | {fmt(e.get('sm_pct'))} | {fmt(e.get('dram_pct'))} | "
                     f"{fmt(e.get('occupancy_pct'))} | {fmt(e.get('registers'), 0)} | {fmt(e.get('blocks'), 0)} x {fmt(e.get('threads'), 0)} |")
    why = [(i, e) for i, e in enumerate(launches) if "stalls" in e]
    if why:
        lines += ["", "| # | stalled on (share of active warps' cycles) | issuing % | occupancy % in theory | blocks an SM by registers / shared / warps | "
                  "instructions | shared-load bank conflicts |", "|---|---|---|---|---|---|---|"]
        for i, e in why:
            limits = " / ".join(fmt(e.get(k), 0) for k in ("blocks_by_registers", "blocks_by_shared", "blocks_by_warps"))
            lines.append(f"| {i} | {top_stalls(e, 5)} | {fmt(e.get('issue_pct'))} | {fmt(e.get('theoretical_occupancy_pct'))} | {limits} | "
                         f"{fmt(e.get('instructions'), 0)} | {fmt(e.get('shared_load_conflicts'), 0)} |")
    return "\n".join(lines) + "\n"


def calls(args):
    """The profile's cold prefill (graphs off: ncu then sees each kernel launched) and throughput call (check.py), and
    between them the prefill's attention in its graph and the split-key kernel on a 24-token question over its
    1,000-token state: name -> (tq_cli's calls, its flags, the kernels to profile, how many, whether to ask why they wait
    too: WHY_METRICS). The cold call's attention took about twice in the engine what the attention probe measured for
    the same tier (bench/gpu/results/h200-2026-11-30-profile.md): its launches' grids, in the graph's fixed form and
    without it, say why. The split-key kernel took 80 µs a layer on a warm question where its loads and arithmetic come
    to a few: whether it waits on memory, on its own latency or on too few warps. A cold call's question runs the same
    tiers as a warm one (its state's keys and its own), so its first two launches of the kernel are a warm question's.
    And `down` on a warm question's 24 rows through tq_cli's probe, each GEMM launched once (`gemm-rows --time off`): a
    cold state's cuBLAS GEMM, cuBLAS's on the 24 rows (the 64x256-tile kernel, half of a warm call's GPU time in the
    window of 2026-11-30) and each tiling of our own few-row GEMM, with why they wait. Its entry's calls are None: its
    flags are tq_cli's whole command."""
    sys.path.insert(0, HERE)
    import check  # noqa: E402 (torch, which check imports, is the GPU machine's)

    folder, _config, (state, questions, labels, many) = check.bench_inputs(args, args.states)
    q = lambda tokens: {"tokens": tokens, "labelIds": labels}  # noqa: E731
    base = ["--model", folder, "--device", "cuda", "--dtype", "bf16", *check.FAST_PATHS[check.DEFAULT_PATH], "--prefix-cache", "off"]
    cold = [[{"state": state[:-1], "questions": [q(state[-1:])]}]]
    return {
        "cold-1000": (cold, [*base, "--cuda-graphs", "off"], MATCH, KERNELS, False),
        # The same prefill's attention in its graph (ncu profiles a graph's kernels one by one): the fixed form's grids,
        # beside the plain plan's above, for FlashAttention-2's 64.6 against 35.5 µs a layer.
        "cold-1000-graph-attention": (cold, base, "regex:flash_fwd", 2, False),
        "split-key-24-over-1000": ([[{"state": state, "questions": [q(questions[0])]}]], [*base, "--cuda-graphs", "off", "--state-attention", "split-key"],
                                   "regex:split_key_kernel", 2, True),
        "down-24-rows-gemm-forms": (None, ["gemm-rows", "--device", "cuda", "--rows", "24", "--shapes", "1024x3072", "--time", "off"],
                                    "regex:few_rows_mma|xmma|nvjet|gemm", 6, True),
        f"throughput-{len(many)}x1001": ([[{"state": s, "questions": [q(questions[0][:1])]} for s in many]], [*base, "--max-step-tokens", "16384"],
                                         MATCH, KERNELS, False),
    }


def counters(args, name, call, flags, match, count, why=False):
    """One call under ncu: its first `count` launches whose names `match`, or the error. With `why`, WHY_METRICS too; where
    that run gives nothing (an ncu without one of them), the call again without them, saying so under "why_error"."""
    if why:
        asked = run_ncu(args, name, call, flags, match, count, {**METRICS, **WHY_METRICS})
        if asked["launches"]:
            return asked
        return {**run_ncu(args, name, call, flags, match, count, METRICS), "why_error": asked["error"]}
    return run_ncu(args, name, call, flags, match, count, METRICS)


def run_ncu(args, name, call, flags, match, count, metrics):
    """One call under ncu with these metrics: `tq_cli answer` on `call`, or where it is None, tq_cli with `flags` alone."""
    calls_file = None
    if call is not None:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"calls": call}, f)
        calls_file = f.name
    report = os.path.join(args.out, f"kernel_counters-{name}.csv")  # ncu's output apart from tq_cli's (its JSON on stdout)
    # The regex sees the demangled name whole (namespaces and all): ncu's default base is the bare function name.
    command = [args.ncu, "--csv", "--log-file", report, "--target-processes", "all", "--kernel-name-base", "demangled", "-k", match, "-c", str(count),
               "--metrics", ",".join(metrics), args.cli, *(["answer", "--calls", calls_file] if calls_file else []), *flags]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
        returncode, stderr = done.returncode, done.stderr
    except subprocess.TimeoutExpired:
        returncode, stderr = "timeout", f"ncu: no end after {args.timeout} s"
    if calls_file:
        os.unlink(calls_file)
    text = open(report).read() if os.path.exists(report) else ""
    launches = parse(text) if '"ID"' in text else []
    return {"command": " ".join(command[:command.index(args.cli)]), "returncode": returncode, "launches": launches,
            "error": None if launches else (stderr.strip() or text.strip())[-1500:]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cli")
    parser.add_argument("--models")
    parser.add_argument("--out")
    parser.add_argument("--bench-model", default="bench-qwen3")
    parser.add_argument("--states", type=int, default=32)
    parser.add_argument("--ncu", default=shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
    parser.add_argument("--timeout", type=float, default=30, help="seconds ncu may take a call")
    parser.add_argument("--parse", help="print the launches read from a CSV ncu wrote (JSON), and nothing else")
    parser.add_argument("--dry-run", action="store_true", help="print each call's size and tq_cli flags (JSON) instead of running ncu")
    args = parser.parse_args()
    if args.parse:
        print(json.dumps(parse(open(args.parse).read())))
        return
    if args.dry_run:
        print(json.dumps({name: {"requests": len(call[0]) if call else 0, "tokens": sum(len(r["state"]) + len(r["questions"][0]["tokens"]) for r in call[0]) if call else 0,
                                 "flags": flags, "kernels": match, "count": count, "why": why} for name, (call, flags, match, count, why) in calls(args).items()}))
        return
    result, md = {}, ["# Nsight Compute's counters: each call's first launches (bench-qwen3, bf16, the fast path)", ""]
    for name, (call, flags, match, count, why) in calls(args).items():
        result[name] = counters(args, name, call, flags, match, count, why)
        md += [f"## {name}", "", markdown(result[name]["launches"]) if result[name]["launches"] else f"no counters: {result[name]['error']}\n"]
        if result[name].get("why_error"):
            md += [f"(why it waits: not measured, ncu said: {result[name]['why_error'][-300:]})", ""]
        with open(os.path.join(args.out, "kernel_counters.json"), "w") as out:  # after each call: a kill keeps what was measured
            json.dump(result, out, indent=1)
        with open(os.path.join(args.out, "kernel_counters.md"), "w") as out:
            out.write("\n".join(md))
        print("\n".join(md[-3:]), flush=True)


if __name__ == "__main__":
    main()
