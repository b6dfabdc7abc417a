"""The window's first step (bench/gpu/window.py): within ~20 s, what the rest relies on, each check guarded and
written to OUT/preflight.json as it completes:

- versions: Python, torch (and its CUDA, cuDNN), transformers, nvcc, CMake, ninja, the GPU and its driver;
- FlashAttention-2 in this torch: available, and the schemas of `_flash_attention_forward` and
  `_efficient_attention_forward` (kernels/cascade/flash_attention.cpp passes FA2 its first 14 arguments);
- one varlen FA2 call (bf16, 16 query heads over 8 key heads, bottom-right causal, sequences with fewer queries
  than keys) and one memory-efficient call (fp32, repeated key heads): their LSE shapes asserted ([heads, total_q];
  [sequences, heads, rows rounded up to 32]), outputs and LSEs against a float64 reference; a sequence without keys
  (what each kernel leaves in its LSE: the merge never reads it); and the same FA2 call with each sequence's keys read
  in place in a larger store, from offsets out of order (`cu_seq_k` each sequence's first row, `seqused_k` its keys:
  how the cascade reads runs of the KV cache's slots), which must give the gathered call's bits;
- the headers and files the build needs.

    python3 bench/gpu/preflight.py --out OUT [--device cuda|cpu]

On the CPU the GPU calls are reported as skipped."""
import argparse
import importlib.metadata
import json
import math
import os
import platform
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tq_cli import write_results  # noqa: E402


def command_version(*command):
    """The line of a tool's version output that names it (nvcc's "release" line; else the first)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=15)
        lines = (done.stdout or done.stderr).strip().splitlines()
        return next((line for line in lines if "release" in line), lines[0])
    except (OSError, subprocess.TimeoutExpired, IndexError) as e:
        return f"absent ({type(e).__name__})"


def versions(torch):
    v = {"python": platform.python_version(), "nvcc": command_version("nvcc", "--version"), "cmake": command_version("cmake", "--version"),
         "ninja": command_version("ninja", "--version")}
    try:
        v["transformers"] = importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        v["transformers"] = "absent"
    if torch is None:
        v["torch"] = "absent"
        return v
    v.update(torch=torch.__version__, torch_cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version() if torch.cuda.is_available() else None)
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        v.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 2**30, 1), capability=f"{p.major}.{p.minor}", sms=p.multi_processor_count,
                 driver=command_version("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"))
    return v


def schemas(torch):
    out = {"flash_available": torch.backends.cuda.is_flash_attention_available() if hasattr(torch.backends.cuda, "is_flash_attention_available") else None}
    for op in ["_flash_attention_forward", "_efficient_attention_forward"]:
        schema = getattr(torch.ops.aten, op).default._schema
        out[op] = {"schema": str(schema), "arguments": len(schema.arguments), "names": [a.name for a in schema.arguments]}
    names = out["_flash_attention_forward"]["names"]
    # flash_attention.cpp passes q..seqused_k: the 14 first arguments must be these.
    expected = ["query", "key", "value", "cum_seq_q", "cum_seq_k", "max_q", "max_k", "dropout_p", "is_causal", "return_debug_mask", "scale",
                "window_size_left", "window_size_right", "seqused_k"]
    out["flash_first_14_as_expected"] = names[:14] == expected
    return out


def reference(q, k, v, seq_q, seq_k):
    """float64 attention per sequence, bottom-right causal, key heads repeated; out [total_q, H, D], lse [H, total_q]."""
    import torch

    outs, lses, qi, ki = [], [], 0, 0
    group = q.shape[1] // k.shape[1]
    for nq, nk in zip(seq_q, seq_k):
        qs, ks, vs = (x.double() for x in (q[qi:qi + nq], k[ki:ki + nk], v[ki:ki + nk]))
        ks, vs = ks.repeat_interleave(group, 1), vs.repeat_interleave(group, 1)
        scores = torch.einsum("qhd,khd->hqk", qs, ks) / math.sqrt(q.shape[2])
        visible = torch.arange(nk)[None, :] <= (torch.arange(nq)[:, None] + nk - nq)
        scores = scores.masked_fill(~visible.to(scores.device), float("-inf"))
        lse = scores.logsumexp(-1)
        outs.append(torch.einsum("hqk,khd->qhd", (scores - lse[..., None]).exp(), vs))
        lses.append(lse)
        qi, ki = qi + nq, ki + nk
    return torch.cat(outs), torch.cat(lses, 1)


def attention_case(torch, dtype, heads, kv_heads, seq_q, seq_k, dim=128):
    g = torch.Generator(device="cuda").manual_seed(53)
    make = lambda n, h: torch.randn(n, h, dim, device="cuda", generator=g).to(dtype)  # noqa: E731
    q, k, v = make(sum(seq_q), heads), make(sum(seq_k), kv_heads), make(sum(seq_k), kv_heads)
    cu = lambda s: torch.tensor([0, *torch.tensor(s).cumsum(0).tolist()], dtype=torch.int32, device="cuda")  # noqa: E731
    return q, k, v, cu(seq_q), cu(seq_k)


def flash_call(torch):
    seq_q, seq_k = [5, 1, 7], [9, 4, 7]  # fewer queries than keys: bottom-right causal shows
    q, k, v, cu_q, cu_k = attention_case(torch, torch.bfloat16, 16, 8, seq_q, seq_k)
    out, lse = torch.ops.aten._flash_attention_forward(q, k, v, cu_q, cu_k, max(2, max(seq_q)), max(seq_k), 0.0, True, False,
                                                       scale=1 / math.sqrt(128))[:2]
    r = {"lse_shape": list(lse.shape), "lse_dtype": str(lse.dtype), "out_shape": list(out.shape)}
    r["lse_shape_ok"] = lse.dim() == 2 and list(lse.shape) == [16, sum(seq_q)]
    ref_out, ref_lse = reference(q, k, v, seq_q, seq_k)
    r["out_max_diff"] = (out.double() - ref_out).abs().max().item()
    if r["lse_shape_ok"]:
        r["lse_max_diff"] = (lse.double() - ref_lse).abs().max().item()
    # A sequence without keys: its output and what FA2 leaves in its LSE (the merge must not read it).
    q, k, v, cu_q, cu_k = attention_case(torch, torch.bfloat16, 16, 8, [3, 2], [0, 5])
    out, lse = torch.ops.aten._flash_attention_forward(q, k, v, cu_q, cu_k, 3, 5, 0.0, True, False, scale=1 / math.sqrt(128))[:2]
    r["keyless_lse"] = lse[0, 0].item() if lse.dim() == 2 else f"shape {list(lse.shape)}"
    r["keyless_out_max"] = out[:3].abs().max().item()
    r["store_runs_same_bits"] = store_runs_same_bits(torch)
    r["passed"] = r["lse_shape_ok"] and r["out_max_diff"] < 2e-2 and r.get("lse_max_diff", 1) < 2e-2 and r["store_runs_same_bits"]
    return r


def store_runs_same_bits(torch):
    """The keys of three sequences at rows 40, 3 and 20 of a store of 64 (the rest NaN), read in place through cu_seq_k
    (each sequence's first row, out of order) and seqused_k, against the same keys gathered into one array."""
    seq_q, seq_k = [5, 1, 7], [9, 4, 7]
    q, k, v, cu_q, cu_k = attention_case(torch, torch.bfloat16, 16, 8, seq_q, seq_k)
    starts = [40, 3, 20]
    rows = torch.cat([torch.arange(s, s + n) for s, n in zip(starts, seq_k)]).cuda()
    k_store = torch.full((64, *k.shape[1:]), float("nan"), dtype=k.dtype, device="cuda").index_copy_(0, rows, k)
    v_store = torch.full((64, *v.shape[1:]), float("nan"), dtype=v.dtype, device="cuda").index_copy_(0, rows, v)
    run = lambda k_, v_, cu_k_, used: torch.ops.aten._flash_attention_forward(  # noqa: E731
        q, k_, v_, cu_q, cu_k_, max(2, max(seq_q)), max(seq_k), 0.0, True, False, scale=1 / math.sqrt(128), window_size_left=None,
        window_size_right=-1, seqused_k=used)[:2]
    gathered = run(k, v, cu_k, None)
    in_place = run(k_store, v_store, torch.tensor([*starts, 0], dtype=torch.int32, device="cuda"),
                   torch.tensor(seq_k, dtype=torch.int32, device="cuda"))
    return all(torch.equal(a, b) for a, b in zip(gathered, in_place))


def efficient_call(torch):
    seq_q, seq_k = [5, 1, 7], [9, 4, 7]
    q, k, v, cu_q, cu_k = attention_case(torch, torch.float32, 16, 8, seq_q, seq_k)
    kr, vr = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)  # no GQA in this kernel
    result = torch.ops.aten._efficient_attention_forward(q[None], kr[None], vr[None], None, cu_q, cu_k, max(2, max(seq_q)), max(seq_k), 0.0, 2, True,
                                                         scale=1 / math.sqrt(128))
    out, lse = result[0][0], result[1]
    # flash_attention.cpp reads it as [sequences, heads, at least max_q rows] (libtorch pads the rows to 32: noted).
    r = {"lse_shape": list(lse.shape), "out_shape": list(out.shape), "rows_padded_to_32": lse.dim() == 3 and lse.shape[2] % 32 == 0}
    r["lse_shape_ok"] = lse.dim() == 3 and list(lse.shape[:2]) == [len(seq_q), 16] and lse.shape[2] >= max(2, max(seq_q))
    ref_out, ref_lse = reference(q, k, v, seq_q, seq_k)
    r["out_max_diff"] = (out.double() - ref_out).abs().max().item()
    if r["lse_shape_ok"]:
        rows = torch.cat([torch.arange(n) for n in seq_q]).cuda()
        seqs = torch.cat([torch.full((n,), s) for s, n in enumerate(seq_q)]).cuda()
        r["lse_max_diff"] = (lse[seqs, :, rows].t().double() - ref_lse).abs().max().item()
    q, k, v, cu_q, cu_k = attention_case(torch, torch.float32, 16, 16, [3, 2], [0, 5])
    result = torch.ops.aten._efficient_attention_forward(q[None], k[None], v[None], None, cu_q, cu_k, 3, 5, 0.0, 2, True, scale=1 / math.sqrt(128))
    r["keyless_lse"] = result[1][0, 0, 0].item()
    r["passed"] = r["lse_shape_ok"] and r["out_max_diff"] < 1e-4 and r.get("lse_max_diff", 1) < 1e-4
    return r


def headers(torch):
    """The files the build includes or links, where it will look for them."""
    found = {}
    if torch is not None:
        from torch.utils import cpp_extension

        torch_dir = os.path.join(torch.utils.cmake_prefix_path, "Torch")
        found["TorchConfig.cmake"] = os.path.exists(os.path.join(torch_dir, "TorchConfig.cmake"))
        includes = cpp_extension.include_paths()
        for header in ["ATen/ATen.h", "torch/version.h", "c10/cuda/CUDAStream.h", "ATen/cuda/CUDAGraph.h", "ATen/ops/_flash_attention_forward.h",
                       "ATen/ops/_efficient_attention_forward.h", "ATen/cuda/CUDAContext.h"]:
            found[header] = any(os.path.exists(os.path.join(d, header)) for d in includes)
        lib = os.path.join(os.path.dirname(torch.__file__), "lib")
        found["libtorch_cuda.so"] = os.path.exists(os.path.join(lib, "libtorch_cuda.so"))
    nvcc = shutil.which("nvcc")
    cuda_include = [os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "include")] if nvcc else []
    found["cuda_runtime_api.h"] = any(os.path.exists(os.path.join(d, "cuda_runtime_api.h")) for d in cuda_include + ["/usr/local/cuda/include"])
    json_dirs = [os.environ.get("TQ_JSON_INCLUDE", ""), "/usr/include", "/usr/local/include"]
    found["nlohmann/json.hpp"] = any(d and os.path.exists(os.path.join(d, "nlohmann", "json.hpp")) for d in json_dirs)
    return found


def cublaslt_header(torch):
    """Where cuBLASLt's header is, if anywhere: the engine's GEMMs could choose cuBLASLt's algorithm themselves (the
    batch-invariant GEMM on few rows: docs/gpu.md) only where a CUDA build can include it. Not needed by today's build."""
    nvcc = shutil.which("nvcc")
    places = [os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "include")] if nvcc else []
    places += ["/usr/local/cuda/include", "/usr/include"]
    if torch is not None:
        nvidia = os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia")
        if os.path.isdir(nvidia):
            places += [os.path.join(nvidia, d, "include") for d in sorted(os.listdir(nvidia))]
    return [p for p in places if os.path.exists(os.path.join(p, "cublasLt.h"))]


def attention_impls(torch):
    """The attention kernels beyond libtorch's own FlashAttention-2 that this machine could give the engine: the
    flash implementations torch has registered (FA3 and FA4 come as separate packages, for Hopper and later), and
    whether FlashAttention's own packages import. Where one is at hand, a state's own tier could run on it (the cold
    prefill's attention is the first kernel of its profile)."""
    found = {"torch_flash_impls": None, "packages": {}}
    attention = getattr(getattr(torch, "nn", None), "attention", None) if torch is not None else None
    if attention is not None and hasattr(attention, "list_flash_attention_impls"):
        found["torch_flash_impls"] = list(attention.list_flash_attention_impls())
    for package in ("flash_attn_interface", "flash_attn", "flash_attn_3"):
        try:
            __import__(package)
            found["packages"][package] = True
        except Exception:
            found["packages"][package] = False
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    results = {}
    save = lambda: write_results(args.out, "preflight", results, "```json\n" + json.dumps(results, indent=2) + "\n```\n")  # noqa: E731
    try:
        import torch
    except ImportError:
        torch = None
    cuda = torch is not None and args.device != "cpu" and torch.cuda.is_available()
    checks = [("versions", lambda: versions(torch)), ("headers", lambda: headers(torch)), ("cublaslt_header", lambda: cublaslt_header(torch)),
              ("attention_impls", lambda: attention_impls(torch))]
    if cuda:
        checks += [("schemas", lambda: schemas(torch)), ("flash", lambda: flash_call(torch)), ("efficient", lambda: efficient_call(torch))]
    for name, check in checks:
        try:
            results[name] = check()
        except Exception as e:  # recorded; the window goes on
            results[name] = {"error": f"{type(e).__name__}: {str(e)[:1500]}"}
        save()
    v = results["versions"]
    missing = [h for h, there in results["headers"].items() if not there] if "error" not in results["headers"] else ["error"]
    parts = [f"torch {v.get('torch')} (CUDA {v.get('torch_cuda')}), transformers {v.get('transformers')}, {v.get('gpu', 'no GPU')}"]
    for name in ["flash", "efficient"]:
        r = results.get(name)
        if r is None:
            parts.append(f"{name}: skipped (no CUDA)")
        elif "error" in r:
            parts.append(f"{name}: ERROR {r['error'][:200]}")
        else:
            runs = "" if "store_runs_same_bits" not in r else f", store runs {'the same bits' if r['store_runs_same_bits'] else 'DIFFER'}"
            parts.append(f"{name}: lse {r['lse_shape']} {'as expected' if r['lse_shape_ok'] else 'NOT AS EXPECTED'}, out max diff {r['out_max_diff']:.1e}"
                         f"{runs}{'' if r['passed'] else ' FAILED'}")
    parts.append("headers: " + ("all found" if not missing else "missing " + ", ".join(missing)))
    found = results.get("cublaslt_header")
    parts.append("cublasLt.h: " + (", ".join(found) if isinstance(found, list) and found else "not found" if isinstance(found, list) else "error"))
    impls = results.get("attention_impls", {})
    if "error" not in impls:
        there = [p for p, ok in impls.get("packages", {}).items() if ok]
        parts.append(f"flash impls registered: {impls.get('torch_flash_impls')}; packages: {', '.join(there) or 'none'}")
    results["summary"] = "; ".join(parts)
    save()
    print(results["summary"])


if __name__ == "__main__":
    main()
