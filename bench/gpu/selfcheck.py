"""The GPU check's first part (issue 43): for every tiny family, in fp32 and bf16, the fused forward
(`--kernels fused`: the engine's row kernels, the cascade over FlashAttention-2 / the memory-efficient
kernel, the merge kernel) against the ATen one (`--kernels aten`, the verified path) layer by layer, with
`tq_cli selfcheck`: the first layer and tensor where they differ beyond the bound (relative to the tensor's
scale: fp32 1e-4, bf16 5e-2), so that a disagreement is found where it starts. Then the fused forward on
the GPU against the fused forward on the CPU (their host forms: the same arithmetic), label logits only.
Last, CUDA graphs: the same calls (a state asked twice, then its questions in another order: a step
that replays the second's graph with other inputs; three short calls likewise) with `--cuda-graphs on`
against `off`, on the fused forward: label logits within the bound, and how many steps replayed a graph.

    python3 bench/gpu/selfcheck.py --cli build/tq_cli --models build/models --out OUT [--device cuda] [--only A,B] [--stem NAME]

Writes OUT/selfcheck.json and OUT/selfcheck.md (--stem: another name) after every model, so a kill keeps the
models done. Runs without a GPU too (--device cpu), as CI runs it (bench/gpu/window.py's CPU form)."""
import argparse
import json
import os
import random

from tiny import TINY
from tq_cli import cli, run_cli, write_results


def run(args, *extra):
    try:
        return run_cli(args, "selfcheck", extra)
    except RuntimeError as e:
        return {"error": str(e)}


def state_attention(args):
    """The fused forward's state tier as asked (tq_cli selfcheck gives it to an ATen reference only where that runs the cascade)."""
    return ["--state-attention", args.state_attention] if args.state_attention else []


def graphs(args, folder, dtype):
    """The fused forward with and without CUDA graphs on calls whose later steps replay earlier ones' graphs."""
    vocab = json.load(open(os.path.join(folder, "config.json")))["vocab_size"]
    rng = random.Random(43)
    tokens = lambda n: [rng.randrange(vocab) for _ in range(n)]  # noqa: E731
    labels = tokens(4)
    q = lambda n: {"tokens": tokens(n), "labelIds": labels}  # noqa: E731
    state, questions = tokens(200), [q(5), q(7), q(4)]
    short = tokens(4)
    calls = [[{"state": state, "questions": questions}], [{"state": state, "questions": questions}],
             [{"state": state, "questions": questions[::-1]}]] + [[{"state": short, "questions": [q(3)]}] for _ in range(3)]
    base = ["--model", folder, "--device", args.device, "--dtype", dtype, "--kernels", "fused", *state_attention(args)]
    try:
        on, off = cli(args, calls, [*base, "--cuda-graphs", "on"]), cli(args, calls, [*base, "--cuda-graphs", "off"])
    except RuntimeError as e:
        return {"error": str(e)}
    logits = lambda r: [x for call in r["calls"] for req in call for a in req["answers"] for x in a["labelLogits"]]  # noqa: E731
    return {"labelLogitsMaxDiff": max(abs(a - b) for a, b in zip(logits(on), logits(off))),
            "graphReplays": sum(req["graphReplays"] for call in on["calls"] for req in call)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--only", help="these models (comma-separated; default: every tiny family)")
    parser.add_argument("--stem", default="selfcheck")
    parser.add_argument("--dtypes", default="fp32,bf16", type=lambda s: s.split(","))
    parser.add_argument("--state-attention", choices=["varlen", "split-key"], help="the fused forward's state tier (default: the engine's)")
    args = parser.parse_args()
    results = {}
    for name in args.only.split(",") if args.only else TINY:
        folder = os.path.join(args.models, name)
        for dtype in args.dtypes:
            key = f"{name} {dtype}"
            r = run(args, "--model", folder, "--device", args.device, "--dtype", dtype, *state_attention(args))
            if "error" not in r:
                r["tensors"] = [t for t in r["tensors"] if t.get("relative", 0) > r["bound"] / 10 or "error" in t][:20]
            if args.device != "cpu" and "error" not in r:
                # The fused forward on the GPU against its host form on the CPU.
                r["gpu_vs_cpu"] = run(args, "--model", folder, "--device", args.device, "--dtype", dtype, "--reference-kernels", "fused",
                                   "--reference-device", "cpu", *state_attention(args))
                r["gpu_vs_cpu"] = {k: r["gpu_vs_cpu"].get(k) for k in ["labelLogitsMaxDiff", "firstBeyondBound", "error"]}
            if "error" not in r:
                r["graphs"] = graphs(args, folder, dtype)
            results[key] = r
            print(key, "error" if "error" in r else (r["firstBeyondBound"] or {}).get("name", "all within bound"), flush=True)
            write_results(args.out, args.stem, results, markdown(args, results))
    print(markdown(args, results))


def markdown(args, results):
    lines = ["# Self-check: the fused forward against the ATen forward, layer by layer", "",
             f"Device: {args.device}" + (f", `--state-attention {args.state_attention}`" if args.state_attention else "") + ". Bound: the largest difference relative to the tensor's scale (fp32 1e-4, bf16 5e-2).", "",
             "CUDA graphs: label logits with `--cuda-graphs on` against `off` (fused forward), and the steps that replayed a graph.", "",
             "| model | tensors | first beyond the bound | label logits max diff | CUDA graphs: max diff, replays |", "|---|---|---|---|---|"]
    for key, r in results.items():
        if "error" in r:
            lines.append(f"| {key} | error: {r['error'][:300]} | | |")
            continue
        first = r["firstBeyondBound"]
        where = "none" if first is None else f"{first['name']} ({first.get('relative', first.get('error'))})"
        g = r.get("graphs", {"error": "not run"})
        graph = f"error: {g['error'][:200]}" if "error" in g else f"{g['labelLogitsMaxDiff']:.2e}, {g['graphReplays']}"
        lines.append(f"| {key} | {r['tensorsCompared']} | {where} | {r['labelLogitsMaxDiff']:.2e} | {graph} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
