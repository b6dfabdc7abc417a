"""fp8 weights on the GPU (issue 31; docs/quantization.md), run by bench/gpu/run.sh after check.py with
the same tq_cli and models. Writes fp8.json and fp8.md into --out:

- fidelity, per tiny model: label probabilities with fp8 weights (bf16 compute) against bf16 and fp32 on
  the GPU (fp32 is within 1e-4 of the float64 reference there: check.py), max and mean |Δp| over 20
  questions on 4 states, beside bf16's own distance from fp32. A wrong fragment layout or scale in the
  kernel moves probabilities by 1e-1 and more;
- invariance with fp8 weights: check.invariance (alone and cold, batched, cached, other block and step size);
- speed on bench-qwen3, bf16 and fp8 weights in the same run: the 1,000-token cold prefill, a state and 16
  questions, throughput over --states states; linear weight bytes and load time of each.
"""
import json
import os
import random
import statistics

from check import STATE_TOKENS, TINY, arguments, cli, device_name, ids, invariance, logits_of, per_model, softmax, workloads, write_results

FP8 = ["--quantization", "fp8"]


def distances(a, b):
    return [abs(x - y) for p, q in zip(a, b) for x, y in zip(p, q)]


def fidelity(args, name):
    folder = os.path.join(args.models, name)
    vocab = json.load(open(os.path.join(folder, "config.json")))["vocab_size"]
    rng = random.Random(name)
    labels = ids(rng, 8, vocab)
    requests = [{"state": ids(rng, 60 + 20 * i, vocab), "questions": [{"tokens": ids(rng, 8, vocab), "labelIds": labels} for _ in range(5)]}
                for i in range(4)]
    base = ["--model", folder, "--device", args.device]
    probs = lambda extra: [softmax(x) for x in logits_of(cli(args, [requests], base + extra))]  # noqa: E731
    fp8, bf16, fp32 = probs(["--dtype", "bf16", *FP8]), probs(["--dtype", "bf16"]), probs(["--dtype", "fp32"])
    out = {}
    for ref_name, ref in (("bf16", bf16), ("fp32", fp32)):
        d = distances(fp8, ref)
        out[f"vs_{ref_name}_max_abs_p"], out[f"vs_{ref_name}_mean_abs_p"] = max(d), statistics.mean(d)
    out["bf16_vs_fp32_max_abs_p"] = max(distances(bf16, fp32))
    out["invariance"] = invariance(args, folder, requests[0], vocab, "bf16", FP8)
    return out


def speed(args):
    folder = os.path.join(args.models, "bench-qwen3")
    vocab = json.load(open(os.path.join(folder, "config.json")))["vocab_size"]
    state, questions, labels, many = workloads(vocab, args.states)
    q = lambda tokens: {"tokens": tokens, "labelIds": labels}  # noqa: E731
    median_wall = lambda r: statistics.median([w[0] for w in r["wallMs"][1:]])  # noqa: E731
    rep = ["--repeat", str(args.runs + 1)]
    out = {}
    for mode, extra in (("bf16", []), ("fp8", FP8)):
        base = ["--model", folder, "--device", args.device, "--dtype", "bf16", "--prefix-cache", "off", *extra]
        cold = cli(args, [[{"state": state[:-1], "questions": [q(state[-1:])]}]], base + rep)
        sixteen = cli(args, [[{"state": state, "questions": [q(t) for t in questions]}]], base + rep)
        many_call = [{"state": s, "questions": [q(questions[0][:1])]} for s in many]
        throughput = cli(args, [many_call], base + ["--max-step-tokens", "8192", "--repeat", "3"])
        info = cold["info"]
        out[mode] = {"cold_prefill_ms": median_wall(cold), "state_16_questions_ms": median_wall(sixteen),
                     "tokens_per_s": len(many) * (STATE_TOKENS + 1) / (median_wall(throughput) / 1000),
                     "linear_bytes": info.get("linearBytes"), "weights_ms": info.get("weightsMs"), "quantized_kernels": info.get("quantizedKernels"),
                     "cold_label_probabilities": softmax(cold["calls"][0][0]["answers"][0]["labelLogits"])}
    b, f = out["bf16"], out["fp8"]
    out["fp8_over_bf16"] = {"cold_prefill_speedup": b["cold_prefill_ms"] / f["cold_prefill_ms"],
                            "state_16_questions_speedup": b["state_16_questions_ms"] / f["state_16_questions_ms"],
                            "throughput": f["tokens_per_s"] / b["tokens_per_s"], "linear_bytes": f["linear_bytes"] / b["linear_bytes"],
                            "cold_max_abs_p": max(distances([f["cold_label_probabilities"]], [b["cold_label_probabilities"]]))}
    return out


def markdown(results):
    lines = [f"# fp8 weights on the GPU: {results['device']}", "", "## Fidelity and invariance (bf16 compute, fp8 weights)", "",
             "| model | fp8 vs bf16: max / mean abs p | fp8 vs fp32: max / mean | bf16 vs fp32: max | invariance (max abs logit): batch / cache / block |",
             "|---|---|---|---|---|"]
    for name, r in results["fidelity"].items():
        if "error" in r:
            lines.append(f"| {name} | error: {r['error']} | | | |")
            continue
        inv = " / ".join(f"{r['invariance'][k]:.1e}" for k in ["batch", "cache", "block_and_step_size"])
        lines.append(f"| {name} | {r['vs_bf16_max_abs_p']:.1e} / {r['vs_bf16_mean_abs_p']:.1e} | {r['vs_fp32_max_abs_p']:.1e} / "
                     f"{r['vs_fp32_mean_abs_p']:.1e} | {r['bf16_vs_fp32_max_abs_p']:.1e} | {inv} |")
    s = results.get("speed")
    if s and "error" not in s:
        b, f, ratio = s["bf16"], s["fp8"], s["fp8_over_bf16"]
        lines += ["", "## Speed: bench-qwen3, same run", "", "| workload | bf16 weights | fp8 weights | bf16 / fp8 |", "|---|---|---|---|",
                  f"| 1,000-token cold prefill | {b['cold_prefill_ms']:.2f} ms | {f['cold_prefill_ms']:.2f} ms | {ratio['cold_prefill_speedup']:.2f}x |",
                  f"| state + 16 questions | {b['state_16_questions_ms']:.2f} ms | {f['state_16_questions_ms']:.2f} ms | {ratio['state_16_questions_speedup']:.2f}x |",
                  f"| throughput, {results['states']} states | {b['tokens_per_s']:,.0f} tok/s | {f['tokens_per_s']:,.0f} tok/s | "
                  f"{ratio['throughput']:.2f}x (fp8 / bf16) |",
                  f"| linear weights | {b['linear_bytes'] / 2**20:.0f} MiB | {f['linear_bytes'] / 2**20:.0f} MiB | {ratio['linear_bytes']:.2f}x (fp8 / bf16) |",
                  "", f"fp8 quantized at load in {f['weights_ms']:.0f} ms (kernels {f['quantized_kernels']}); cold label probabilities "
                  f"fp8 vs bf16: max abs diff {ratio['cold_max_abs_p']:.1e}."]
    elif s:
        lines += ["", f"## Speed: error: {s['error']}"]
    return "\n".join(lines) + "\n"


def main():
    args = arguments().parse_args()
    results = {"device": device_name(args), "states": args.states, "fidelity": {}}
    save = lambda: write_results(args.out, "fp8", results, markdown(results))  # noqa: E731
    per_model(args.only.split(",") if args.only else TINY, lambda name: fidelity(args, name), save, results["fidelity"])
    try:
        results["speed"] = speed(args)
    except Exception as e:
        results["speed"] = {"error": repr(e)}
    save()
    print(markdown(results))


if __name__ == "__main__":
    main()
