"""Why each kernel of a layer takes its time: Nsight Compute's counters for the first layer of the throughput call.

The profile ranks kernels by time; it cannot say whether a kernel is bound by memory, by its arithmetic, or by
latency (too few warps, too little in flight). At 32 states x 1,001 tokens our row kernels take a third of the GPU's
time (qk_norm_rope 17%, add_rms_norm 9%, gated_mul 6%: bench/gpu/results/h200-2026-11-30-profile.md), where moving
their bytes once would take less. So this runs that call under `ncu`, our kernels and the GEMMs and attention beside
them (the first KERNELS launches that match), with the counters that say which limit each meets: its duration, its
memory and SM throughput as a share of the device's peak, DRAM's, the warps it keeps active, its registers and grid.
Writes OUT/kernel_counters.{json,md} and ncu's CSV as it came (kernel_counters.csv); no build of its own.

    python3 bench/gpu/kernel_counters.py --cli build/tq_cli --models DIR --out OUT [--ncu ncu]
    python3 bench/gpu/kernel_counters.py --parse FILE.csv      (the table from a CSV ncu wrote; CI checks the parser)
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
        key = METRICS.get(row["Metric Name"])
        if key is None:
            continue
        value = number(row["Metric Value"])
        # Durations come in the unit ncu picks (ns, us, ms): ours is µs.
        scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(row.get("Metric Unit", ""), 1.0)
        entry[key] = value * scale if key == "us" and value is not None else value
    return [launches[k] for k in sorted(launches, key=int)]


def markdown(launches):
    lines = ["| # | kernel | µs | memory % | SM % | DRAM % | warps active % | registers | blocks x threads |", "|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda v, d=1: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
    for i, e in enumerate(launches):
        name = e["kernel"].split("(")[0][:70]
        lines.append(f"| {i} | `{name}` | {fmt(e.get('us'))} | {fmt(e.get('memory_pct'))} | {fmt(e.get('sm_pct'))} | {fmt(e.get('dram_pct'))} | "
                     f"{fmt(e.get('occupancy_pct'))} | {fmt(e.get('registers'), 0)} | {fmt(e.get('blocks'), 0)} x {fmt(e.get('threads'), 0)} |")
    return "\n".join(lines) + "\n"


def throughput_call(args):
    """The profile's throughput call (check.py): its calls and tq_cli flags."""
    sys.path.insert(0, HERE)
    import check  # noqa: E402 (torch, which check imports, is the GPU machine's)

    args.bench_model = args.bench_model or "bench-qwen3"
    folder, _config, (_state, questions, labels, many) = check.bench_inputs(args, args.states)
    calls = [[{"state": s, "questions": [{"tokens": questions[0][:1], "labelIds": labels}]} for s in many]]
    flags = ["--model", folder, "--device", "cuda", "--dtype", "bf16", *check.FAST_PATHS[check.DEFAULT_PATH],
             "--prefix-cache", "off", "--max-step-tokens", "16384"]
    return calls, flags


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cli")
    parser.add_argument("--models")
    parser.add_argument("--out")
    parser.add_argument("--bench-model")
    parser.add_argument("--states", type=int, default=32)
    parser.add_argument("--ncu", default=shutil.which("ncu") or "/usr/local/cuda/bin/ncu")
    parser.add_argument("--timeout", type=float, default=40, help="seconds ncu may take")
    parser.add_argument("--parse", help="print the launches read from a CSV ncu wrote (JSON), and nothing else")
    args = parser.parse_args()
    if args.parse:
        launches = parse(open(args.parse).read())
        print(json.dumps(launches))
        return
    calls, flags = throughput_call(args)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"calls": calls}, f)
    report = os.path.join(args.out, "kernel_counters.csv")  # ncu's output apart from tq_cli's (its JSON on stdout)
    command = [args.ncu, "--csv", "--log-file", report, "--target-processes", "all", "-k", MATCH, "-c", str(KERNELS),
               "--metrics", ",".join(METRICS), args.cli, "answer", "--calls", f.name, *flags]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
        returncode, stderr = done.returncode, done.stderr
    except subprocess.TimeoutExpired:
        returncode, stderr = "timeout", f"ncu: no end after {args.timeout} s"
    os.unlink(f.name)
    text = open(report).read() if os.path.exists(report) else ""
    launches = parse(text) if '"ID"' in text else []
    result = {"command": " ".join(command[:command.index(args.cli)]), "returncode": returncode, "launches": launches,
              "error": None if launches else (stderr.strip() or text.strip())[-1500:]}
    with open(os.path.join(args.out, "kernel_counters.json"), "w") as out:
        json.dump(result, out, indent=1)
    with open(os.path.join(args.out, "kernel_counters.md"), "w") as out:
        out.write("# Nsight Compute's counters, the throughput call's first launches (32 x 1,001, bf16, the fast path)\n\n")
        out.write(markdown(launches) if launches else f"no counters: {result['error']}\n")
    print(markdown(launches) if launches else f"no counters: {result['error']}", flush=True)


if __name__ == "__main__":
    main()
