"""Which way of running a layer's GEMM on few rows is fast and keeps a row's bits, with split-K off.

The batch-invariant engine forbids cuBLAS's split-K (aten_layer_kernels.cpp): a split GEMM gives a row other bits when
it runs with few rows than with many. On an H200, cuBLASLt's choice for bench-qwen3's `down` (in 3,072, out 1,024) with
a warm question's 32 rows is then one kernel with 64x256 tiles (`sm90_xmma_gemm_..._tilesize64x256x64`): 69 µs a layer,
half of the warm call's GPU time (bench/gpu/results/h200-2026-11-30-profile.md), where the split kernel it replaces
took a few. The other three GEMMs kept fast kernels. So this times, on each of bench-qwen3's GEMM shapes and on few
rows, the forms torch can run the same products in, split-K off as the engine sets it:
  linear        F.linear(x, w): what the engine runs;
  padP          x copied into P rows (P above M), F.linear on them, the first M rows kept: cuBLASLt chooses for P rows;
  bias_neg0     addmm with a bias of -0.0 (x + -0.0 is x, signed zeros too): cuBLASLt's bias epilogue, chosen apart;
  swapped       (w x^T)^T: the transposed problem, chosen apart;
  colsC         a batch of C GEMMs over the output's columns, written in place (bmm into a strided view);
and whether each keeps the bits a row gets in F.linear over 1,024 rows (a cold state's GEMM; kernels without split-K
have agreed row for row: bench/gpu/results/h200-2026-11-28-row-invariance). Also `linear` with split-K allowed: what
invariance costs. Each time is the median call of 28 (a forward's layers) captured in one CUDA graph, replayed; each
form's kernels are named from the profiler. Prints a table and writes one JSON object; no build needed.
`--cpu-check` instead runs every form on the CPU in float64 against F.linear (CI: test/kernels/gemm-probe.test.ts), so
that what a window times is the same product.

    python3 bench/gpu/gemm_probe.py [--out FILE]
    python3 bench/gpu/gemm_probe.py --cpu-check
"""
import argparse
import json
import statistics

import torch

from row_invariance import no_split_k

# bench-qwen3 (Qwen3-0.6B's shape): (in, out) of each GEMM of a layer.
SHAPES = {"qkv": (1024, 4096), "o": (2048, 1024), "gate_up": (1024, 6144), "down": (3072, 1024)}
ROWS = [8, 32, 128]
COLD_ROWS = 1024
LAYERS, REPLAYS = 28, 20


def linear(x, w, _bias):
    return torch.nn.functional.linear(x, w)


def padded(p):
    def run(x, w, _bias):
        buf = x.new_empty(p, x.shape[1])  # rows past M left as they are: a row's products never mix with another's
        buf[: x.shape[0]].copy_(x)
        return torch.nn.functional.linear(buf, w)[: x.shape[0]]
    return run


def bias_neg0(x, w, bias):
    return torch.addmm(bias, x, w.t())


def swapped(x, w, _bias):
    return torch.mm(w, x.t()).t().contiguous()


def column_chunks(c):
    def run(x, w, _bias):
        m, k = x.shape
        n = w.shape[0]
        out = x.new_empty(m, n)
        torch.bmm(x.unsqueeze(0).expand(c, m, k), w.view(c, n // c, k).transpose(1, 2), out=out.view(m, c, n // c).transpose(0, 1))
        return out
    return run


FORMS = {"linear": linear, "pad128": padded(128), "pad256": padded(256), "bias_neg0": bias_neg0, "swapped": swapped,
         "cols4": column_chunks(4), "cols8": column_chunks(8), "cols16": column_chunks(16), "cols32": column_chunks(32),
         "cols64": column_chunks(64)}


def graph_us(fn, x, w, bias):
    """Median µs a call: LAYERS calls captured in one CUDA graph, replayed REPLAYS times."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(x, w, bias)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(LAYERS):
            fn(x, w, bias)
    times = []
    for _ in range(REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / LAYERS)
    return round(statistics.median(times), 2)


def kernels_of(fn, x, w, bias):
    """The GPU kernels one call launches, by name."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn(x, w, bias)
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})


def probe(name, k, n):
    x_cold = torch.randn(COLD_ROWS, k, device="cuda").to(torch.bfloat16)
    w = (torch.randn(n, k, device="cuda") * k ** -0.5).to(torch.bfloat16)
    bias = torch.full((n,), -0.0, device="cuda", dtype=torch.bfloat16)
    entry = {}
    for m in ROWS:
        x = x_cold[:m].contiguous()
        with no_split_k():
            cold = linear(x_cold, w, bias)[:m]
            forms = {}
            for form, fn in FORMS.items():
                if form.startswith("pad") and int(form[3:]) <= m:
                    continue
                try:
                    forms[form] = {"us": graph_us(fn, x, w, bias), "same_bits_as_cold": bool(torch.equal(fn(x, w, bias), cold)),
                                   "kernels": kernels_of(fn, x, w, bias)}
                except Exception as e:  # a form torch refuses here is reported, not the end of the probe
                    forms[form] = {"error": repr(e)[:200]}
        forms["linear_split_k_allowed"] = {"us": graph_us(linear, x, w, bias), "same_bits_as_cold": bool(torch.equal(linear(x, w, bias), cold)),
                                           "kernels": kernels_of(linear, x, w, bias)}
        entry[m] = forms
        best = min((f for f in forms if "us" in f and forms[f]["same_bits_as_cold"] and f != "linear_split_k_allowed"),
                   key=lambda f: forms[f]["us"], default=None)
        line = "  ".join(f"{f} {e['us']}{'' if e['same_bits_as_cold'] else '≠'}" if "us" in e else f"{f} error" for f, e in forms.items())
        print(f"{name} ({k}->{n}) M={m}: {line}; fastest same-bits: {best}", flush=True)
    return entry


def cpu_check():
    """Every form against F.linear on the CPU in float64, on each shape and row count (pads above the rows only)."""
    cases = []
    for name, (k, n) in SHAPES.items():
        x_all = torch.randn(max(ROWS), k, dtype=torch.float64)
        w = torch.randn(n, k, dtype=torch.float64) * k ** -0.5
        bias = torch.full((n,), -0.0, dtype=torch.float64)
        for m in ROWS:
            x = x_all[:m].contiguous()
            want = torch.nn.functional.linear(x, w)
            for form, fn in FORMS.items():
                if form.startswith("pad") and int(form[3:]) <= m:
                    continue
                got = fn(x, w, bias)
                cases.append({"shape": name, "rows": m, "form": form, "size_ok": list(got.shape) == [m, n],
                              "max_diff": float((got - want).abs().max())})
    ok = all(c["size_ok"] and c["max_diff"] < 1e-12 for c in cases)
    print(json.dumps({"cases": cases, "ok": ok}))
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out")
    parser.add_argument("--cpu-check", action="store_true")
    args = parser.parse_args()
    if args.cpu_check:
        raise SystemExit(cpu_check())
    torch.manual_seed(0)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "layers": LAYERS, "cold_rows": COLD_ROWS,
              "note": "µs a call (median of a graph of LAYERS calls); ≠: bits differ from F.linear over cold_rows rows", "shapes": {}}
    for name, (k, n) in SHAPES.items():
        result["shapes"][name] = probe(name, k, n)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
