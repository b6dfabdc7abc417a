"""Which of the GPU fast path's ATen calls give a row different bits when the rows around it change?

The fast path's answer from a cached state differed from a cold one (bf16, bench-qwen3: invariance step). A cached
question runs its layers' GEMMs on a few rows, a cold prefill on a thousand: if cuBLAS picks another kernel (a split-K
one, say) by the row count, a row's bits change. This measures that alone, with torch, on the bench model's shapes,
and tries the ways round it: bf16 reductions kept in fp32, cuBLASLt, cuBLASLt without split-K (the engine's
choice), and GEMMs run as a batch of fixed-size row chunks (one shape for every call). Prints one JSON object; no build needed.

    python3 bench/gpu/row_invariance.py [--out FILE]
"""
import argparse
import json
import time

import torch

# bench-qwen3 (Qwen3-0.6B's shape): (in, out) of each GEMM of a layer.
SHAPES = {"qkv": (1024, 4096), "o": (2048, 1024), "gate_up": (1024, 6144), "down": (3072, 1024)}
ROWS = [1, 2, 8, 16, 24, 32, 64, 128, 256, 512, 1000, 1008, 1024, 2048, 8064]
REFERENCE = 1008


def rows_differing(fn, x, w):
    """For each row count M: the largest |Δ| of the first row between M rows and REFERENCE rows."""
    ref = fn(x[:REFERENCE], w)[:1]
    return {m: float((fn(x[:m], w)[:1].float() - ref.float()).abs().max()) for m in ROWS}


def mm(x, w):
    return torch.nn.functional.linear(x, w)


def chunked(chunk):
    def run(x, w):
        m = x.shape[0]
        pad = (-m) % chunk
        xp = torch.nn.functional.pad(x, (0, 0, 0, pad)).view(-1, chunk, x.shape[1])
        return torch.bmm(xp, w.t().unsqueeze(0).expand(xp.shape[0], -1, -1)).reshape(-1, w.shape[0])[:m]
    return run


class no_split_k:
    """ATen's switch that the engine throws on CUDA when batch-invariant: cuBLASLt, no split-K for bf16/fp16."""
    def __enter__(self):
        torch.backends.cuda.preferred_blas_library("cublaslt")
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = (False, False)

    def __exit__(self, *_):
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
        torch.backends.cuda.preferred_blas_library("cublas")


def timed(fn, x, w, reps=20):
    fn(x, w)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn(x, w)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps * 1e6


def flash_rows():
    """FA2 varlen: a question's 8 rows over 1,008 keys (causal, bottom-right), computed with the state's 1,000 rows
    in one level, and alone; the 8 rows' largest |Δ|."""
    torch.manual_seed(1)
    heads, kv_heads, dim, state, question = 16, 8, 128, 1000, 8
    total = state + question
    q = torch.randn(total, heads, dim, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(total, kv_heads, dim, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(total, kv_heads, dim, device="cuda", dtype=torch.bfloat16)
    cu = lambda n: torch.tensor([0, n], device="cuda", dtype=torch.int32)  # noqa: E731
    scale = dim ** -0.5
    run = lambda qq, mq: torch.ops.aten._flash_attention_forward(qq, k, v, cu(qq.shape[0]), cu(total), max(2, mq), total, 0.0, True, False, scale=scale)  # noqa: E731
    cold = run(q, total)
    alone = run(q[state:].contiguous(), question)
    return {"out": float((cold[0][state:].float() - alone[0].float()).abs().max()),
            "lse": float((cold[1][:, state:] - alone[1]).abs().max())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.manual_seed(0)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "reference_rows": REFERENCE}
    for name, (k, n) in SHAPES.items():
        x = torch.randn(max(ROWS), k, device="cuda", dtype=torch.bfloat16)
        w = (torch.randn(n, k, device="cuda") * k ** -0.5).to(torch.bfloat16)
        entry = {"default": rows_differing(mm, x, w)}
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        entry["fp32_reduction"] = rows_differing(mm, x, w)
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
        try:
            torch.backends.cuda.preferred_blas_library("cublaslt")
            entry["cublaslt"] = rows_differing(mm, x, w)
        finally:
            torch.backends.cuda.preferred_blas_library("cublas")
        with no_split_k():
            entry["no_split_k"] = rows_differing(mm, x, w)  # what the engine sets (aten_layer_kernels.cpp)
        for chunk in (64, 128):
            entry[f"chunks_of_{chunk}"] = rows_differing(chunked(chunk), x, w)
        entry["us"] = {f"{kind}_{m}": round(timed(fn, x[:m], w), 1) for m in (24, 1008, 8064)
                       for kind, fn in (("mm", mm), ("chunks128", chunked(128)))}
        with no_split_k():
            entry["us"].update({f"no_split_k_{m}": round(timed(mm, x[:m], w), 1) for m in (24, 1008, 8064)})
        result[name] = entry
        print(name, json.dumps({key: {m: d for m, d in v.items() if d} if key != "us" else v for key, v in entry.items()}), flush=True)
    try:
        result["flash_question_rows"] = flash_rows()
    except Exception as e:  # the op's signature is libtorch's, not ours
        result["flash_question_rows"] = {"error": repr(e)}
    print("flash", result["flash_question_rows"], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
