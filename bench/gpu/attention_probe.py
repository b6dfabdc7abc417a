"""What each attention kernel a CUDA torch carries costs on the cascade's tiers, before we write our own.

FlashAttention-2 is the first kernel of every profile (docs/gpu.md). Its grid is (query blocks of 128 rows) x
sequences x heads and it walks a sequence's keys in one block, so few rows over many keys leave the GPU idle. This
times, on bench-qwen3's attention shape (16 heads, 8 key heads, dim 128, bf16), each tier the benchmark's calls run,
28 times in one CUDA graph (a forward's layers), with:
  flash      FA2's varlen forward, as the engine calls it (flash_attention.cpp);
  efficient  the memory-efficient kernel (varlen, key heads repeated);
  cudnn      cuDNN's attention through SDPA (dense: the tier's sequences padded to one length, key heads repeated);
  matmul     plain batched matmuls and a softmax (what a split-key kernel's arithmetic costs at most in bytes).
and says whether a row keeps its bits when its tier runs with other sequences beside it (flash, cudnn).
Then a state's own causal tier cut along its keys (CHUNKED): FA2 walks a sequence's keys in one block per 128 rows and
head, so a cold 1,000-token state is 128 blocks of up to 16 key steps each on 132 SMs. Cut into chunks of a fixed
number of keys from the state's first, each chunk's rows over it causally (the diagonal, read in place) and over each
earlier chunk with no mask (the prefix: its rows gathered, the keys read in place through cu_seq_k and seqused_k), then
merged: more blocks, each walking fewer keys. What that costs before it is built into plan_cascade.
And the fixed form's grids (`grid_cases`): a tier's sequences launched alone and with the empty sequences and
the longest (max_q) the fixed form launches them with: what an empty block costs; and a question over a 16,000-token
state in more chunks than the engine's 6 (`long_state_chunkings`). `--grids` times these alone: the window's probes step.
Prints one JSON object; no build needed. `--cpu-check` instead checks the chunked form's plan and merge on the CPU,
with a float64 stand-in for FA2 (the varlen forward as the engine calls it), against the tier whole, and that the grid
cases compute the same rows of their work whatever is launched beside it: what CI runs
(test/kernels/attention-probe.test.ts), so that a window's figures for it are the figures of the same attention.

    python3 bench/gpu/attention_probe.py [--out FILE]
    python3 bench/gpu/attention_probe.py --grids [--out FILE]
    python3 bench/gpu/attention_probe.py --cpu-check
"""
import argparse
import json
import sys
import time

import torch

HEADS, KV_HEADS, DIM, LAYERS = 16, 8, 128, 28
SCALE = DIM ** -0.5
DEVICE = "cuda"  # "cpu" for --cpu-check

# name: (sequences, rows a sequence, keys a sequence, causal): the benchmark's tiers (cascade_plan.cpp's chunks: 4 of
# at least 256 keys until 2026-11-30, then 6 of at least 128, a 1,000-key state's 192 keys each but the last 40).
TIERS = {
    "cold state, 1000 over 1000 causal": (1, 1000, 1000, True),
    "warm question over its state: 4 chunks of 24 over 256": (4, 24, 256, False),
    "warm question over its state: 6 chunks of 24 over 192": (6, 24, 192, False),
    # The same keys cut finer: more blocks side by side, each walking fewer keys (a plan_cascade choice).
    "warm question over its state cut finer: 8 chunks of 24 over 128": (8, 24, 128, False),
    "warm question over its state cut finer: 16 chunks of 24 over 64": (16, 24, 64, False),
    "warm question's own: 24 over 24 causal": (1, 24, 24, True),
    "16 questions over their state: 4 chunks of 384 over 256": (4, 384, 256, False),
    "16 questions over their state: 6 chunks of 384 over 192": (6, 384, 192, False),
    "32 states, 1001 over 1001 causal": (32, 1001, 1001, True),
}


# name: (sequences, keys a sequence, keys a chunk): a state's own tier cut along its keys (above).
CHUNKED = {
    "cold state, 1000 causal, key chunks of 256": (1, 1000, 256),
    "cold state, 1000 causal, key chunks of 128": (1, 1000, 128),
    "32 states, 1001 causal, key chunks of 256": (32, 1001, 256),
}


def grid_cases(scale=1):
    """The fixed form's grids (docs/gpu.md, "The fixed form's grids"): one tier's sequences as the benchmark's calls have
    them, launched alone and with the padding the fixed form launched them with. FA2 launches a block per 128 rows of
    the longest sequence (max_q), sequence and head, empty sequences included: do those cost, and how? Per group, cases
    (name, runs [(rows, keys)], empty sequences after them, max_q, causal); the first run of each is the same work in
    every case of its group. `scale` divides the sizes (the CPU check's)."""
    n = lambda x: max(1, x // scale)  # noqa: E731
    state = [(n(999), n(999))]
    cold = state + [(1, 1), (n(24), n(24))]  # the state's run, its 1-token question's, the padding's (to 1,024 rows)
    sixteen = [(n(1000), n(1000))] + [(n(24), n(24))] * 16 + [(n(152), n(152))]  # and the padding's to 1,536
    chunks_before = [(n(24), n(384))] * 2 + [(n(24), n(232))]  # a question's rows over 1,000 keys in 3 chunks
    chunks_now = [(n(24), n(192))] * 5 + [(n(24), n(40))]  # in 6
    return {
        "cold prefill's own tier": [
            ("the state's run alone (8 x 1)", state, 0, n(999), True),
            ("the step's three runs (8 x 3)", cold, 0, n(1024), True),
            ("and an empty run and the spare keys' (8 x 5: the fixed form's)", cold, 2, n(1024), True),
            ("the state's run and 4 empty (8 x 5)", state, 4, n(1024), True)],
        "16 questions' own tier": [
            ("the state's run alone (8 x 1)", [sixteen[0]], 0, n(1000), True),
            ("the step's 18 runs (8 x 18)", sixteen, 0, n(1024), True),
            ("and 15 empty (8 x 33: the fixed form's now)", sixteen, 15, n(1024), True),
            ("the longest at 1,536 (12 x 33: the fixed form's before)", sixteen, 15, n(1536), True)],
        "warm question's state tier, 3 chunks (before)": [
            ("alone (1 x 3)", chunks_before, 0, n(24), False),
            ("and 14 empty (1 x 17: the fixed form's before)", chunks_before, 14, n(24), False)],
        "warm question's state tier, 6 chunks (now)": [
            ("alone (1 x 6)", chunks_now, 0, n(24), False),
            ("and 6 empty (1 x 12: the fixed form's now)", chunks_now, 6, n(24), False)],
    }


def long_state_chunkings(keys=16000, rows=24, counts=(6, 12, 24, 48)):
    """A question's rows over a long state's keys cut into more chunks than the engine's 6 (cascade_plan.h: kStateChunks,
    bound by the merge's 8 entries a row): a 16,000-token state's 6 chunks are 2,667 keys each, 42 key blocks that one FA2
    block walks in turn. FA2's time for each cut, the merge of more entries aside: what more chunks would give, timed
    before the merge is widened for them. Per cut, its runs [(rows, keys)]."""
    return {f"{count} chunks of about {keys // count} keys": [(rows, keys * (i + 1) // count - keys * i // count) for i in range(count)]
            for count in counts}


def grid_call(runs, empty, max_q, causal, seed=0):
    """FA2 over `runs` and `empty` sequences without rows or keys after them, its grid sized by max_q; returns the call."""
    dtype = torch.bfloat16 if DEVICE == "cuda" else torch.float32
    rows, keys = [r for r, _ in runs] + [0] * empty, [k for _, k in runs] + [0] * empty
    offsets = lambda counts: torch.tensor([0] + [sum(counts[:i + 1]) for i in range(len(counts))], device=DEVICE, dtype=torch.int32)  # noqa: E731
    parts = []  # each run's q, k and v from a seed of its own: a run's values whatever runs come with it
    for i, (r, n) in enumerate(runs):
        g = torch.Generator(device=DEVICE).manual_seed(seed + i)
        parts.append([torch.randn(m, h, DIM, device=DEVICE, dtype=dtype, generator=g) for m, h in ((r, HEADS), (n, KV_HEADS), (n, KV_HEADS))])
    q, k, v = (torch.cat([p[j] for p in parts]) for j in range(3))
    cu_q, cu_k = offsets(rows), offsets(keys)
    return lambda: fa2(q, k, v, cu_q, cu_k, max(2, max_q), max(keys), 0.0, causal, False, scale=SCALE)


def grids():
    """Each grid case's time a layer (the window's probes step runs this alone)."""
    out = {}
    for group, cases in grid_cases().items():
        out[group] = {}
        for name, runs, empty, max_q, causal in cases:
            try:
                out[group][name] = per_layer_us(grid_call(runs, empty, max_q, causal))
            except Exception as e:  # noqa: BLE001 (a shape this torch refuses: said, the others still timed)
                out[group][name] = f"error: {repr(e)[:200]}"
            print(group, name, out[group][name], flush=True)
    group = "a question's 24 rows over a 16,000-token state, by chunks"
    out[group] = {}
    for name, runs in long_state_chunkings().items():
        try:
            out[group][name] = per_layer_us(grid_call(runs, 0, 24, False))
        except Exception as e:  # noqa: BLE001
            out[group][name] = f"error: {repr(e)[:200]}"
        print(group, name, out[group][name], flush=True)
    return out


def tensors(seqs, rows, keys, seed=0):
    dtype = torch.bfloat16 if DEVICE == "cuda" else torch.float32
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    q = torch.randn(seqs * rows, HEADS, DIM, device=DEVICE, dtype=dtype, generator=g)
    k = torch.randn(seqs * keys, KV_HEADS, DIM, device=DEVICE, dtype=dtype, generator=g)
    v = torch.randn(seqs * keys, KV_HEADS, DIM, device=DEVICE, dtype=dtype, generator=g)
    cu = lambda n: torch.arange(0, (seqs + 1) * n, n, device=DEVICE, dtype=torch.int32)  # noqa: E731
    return q, k, v, cu(rows), cu(keys)


def fa2(q, k, v, cu_q, cu_k, max_q, max_k, dropout, causal, debug_mask, scale, window_size_left=None, window_size_right=None,
        seqused_k=None):
    """FlashAttention-2's varlen forward, (out, lse [heads, rows]); on the CPU check, its float64 stand-in: each sequence's
    rows from cu_q over seqused_k keys from cu_k (else to the next offset), causal bottom-right, key heads shared."""
    if DEVICE == "cuda":
        return torch.ops.aten._flash_attention_forward(q, k, v, cu_q, cu_k, max_q, max_k, dropout, causal, debug_mask, scale=scale,
                                                       window_size_left=window_size_left, window_size_right=window_size_right,
                                                       seqused_k=seqused_k)[:2]
    out = torch.zeros(q.shape, dtype=torch.float64)
    lse = torch.full((q.shape[1], q.shape[0]), float("-inf"), dtype=torch.float64)
    group = q.shape[1] // k.shape[1]
    for s in range(len(cu_q) - 1):
        q0, q1, k0 = int(cu_q[s]), int(cu_q[s + 1]), int(cu_k[s])
        nk = int(seqused_k[s]) if seqused_k is not None else int(cu_k[s + 1]) - k0
        keys, values = (x[k0:k0 + nk].double().repeat_interleave(group, 1) for x in (k, v))
        scores = torch.einsum("qhd,khd->hqk", q[q0:q1].double(), keys) * scale
        if causal:
            scores = scores.masked_fill(torch.ones(q1 - q0, nk, dtype=torch.bool).triu(nk - (q1 - q0) + 1), float("-inf"))
        lse[:, q0:q1] = scores.logsumexp(-1)
        out[q0:q1] = torch.einsum("hqk,khd->qhd", (scores - lse[:, q0:q1, None]).exp(), values)
    return out.to(q.dtype), lse.float()


def flash(q, k, v, cu_q, cu_k, rows, keys, causal):
    return fa2(q, k, v, cu_q, cu_k, max(2, rows), keys, 0.0, causal, False, scale=SCALE)


def efficient(q, k, v, cu_q, cu_k, rows, keys, causal):
    group = HEADS // KV_HEADS
    out = torch.ops.aten._efficient_attention_forward(q.unsqueeze(0), k.repeat_interleave(group, 1).unsqueeze(0),
                                                      v.repeat_interleave(group, 1).unsqueeze(0), None, cu_q, cu_k, rows, keys,
                                                      0.0, 2 if causal else 0, True, scale=SCALE)
    return out[0].squeeze(0), out[1]


def dense(q, k, v, seqs, rows, keys):
    group = HEADS // KV_HEADS
    return (q.view(seqs, rows, HEADS, DIM).transpose(1, 2), k.view(seqs, keys, KV_HEADS, DIM).repeat_interleave(group, 2).transpose(1, 2),
            v.view(seqs, keys, KV_HEADS, DIM).repeat_interleave(group, 2).transpose(1, 2))


def cudnn(q, k, v, seqs, rows, keys, causal):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    qd, kd, vd = dense(q, k, v, seqs, rows, keys)
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        # causal only where rows == keys (top-left is bottom-right then)
        return torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, is_causal=causal, scale=SCALE)


def matmul(q, k, v, seqs, rows, keys, causal):
    qd, kd, vd = dense(q, k, v, seqs, rows, keys)
    scores = torch.matmul(qd, kd.transpose(2, 3)).float() * SCALE
    if causal:
        scores = scores.masked_fill(torch.ones(rows, keys, device="cuda", dtype=torch.bool).triu(keys - rows + 1), float("-inf"))
    lse = scores.logsumexp(-1, keepdim=True)
    return torch.matmul((scores - lse).exp().to(vd.dtype), vd), lse


def chunk_plan(seqs, n, chunk):
    """The own tier of `seqs` sequences of n rows over their n keys, cut into chunks of `chunk` keys from each
    sequence's first: the diagonal (chunk c's rows over chunk c, causal; its sequences tile the rows and keys in order,
    so one cu array serves both) and the prefix (chunk c's rows over each earlier chunk, no mask: the rows gathered,
    each sequence's keys at their chunk's first row, seqused_k its length)."""
    cu_diag, pre_rows, pre_first, pre_used, cu_pre = [0], [], [], [], [0]
    for s in range(seqs):
        for c0 in range(0, n, chunk):
            c1 = min(n, c0 + chunk)
            cu_diag.append(s * n + c1)
            for p0 in range(0, c0, chunk):
                pre_rows.extend(range(s * n + c0, s * n + c1))
                pre_first.append(s * n + p0)
                pre_used.append(chunk)
                cu_pre.append(len(pre_rows))
    i32 = lambda a: torch.tensor(a, device=DEVICE, dtype=torch.int32)  # noqa: E731
    return {"cu_diag": i32(cu_diag), "rows": torch.tensor(pre_rows, device=DEVICE, dtype=torch.long), "cu_pre": i32(cu_pre),
            "first": i32(pre_first + [0]), "used": i32(pre_used), "max_diag": min(n, chunk), "max_pre": min(n, chunk)}


def chunked_flash(q, k, v, plan, merged=True):
    """The diagonal and the prefix through FA2, then (merged) each row's partials combined by their log-sum-exps in
    torch ops (ours is one kernel: attention_merge.cu); without the merge, what FA2 and the gather alone cost."""
    o_d, lse_d = fa2(q, k, v, plan["cu_diag"], plan["cu_diag"], max(2, plan["max_diag"]), plan["max_diag"], 0.0, True, False, scale=SCALE)
    if plan["rows"].numel() == 0:
        return o_d
    o_p, lse_p = fa2(q.index_select(0, plan["rows"]), k, v, plan["cu_pre"], plan["first"], max(2, plan["max_pre"]), plan["max_pre"], 0.0,
                     False, False, scale=SCALE, window_size_left=None, window_size_right=-1, seqused_k=plan["used"])
    if not merged:
        return o_d
    rows = plan["rows"]
    top = lse_d.clone().index_reduce_(1, rows, lse_p, "amax")  # [heads, rows]
    w_d, w_p = (lse_d - top).exp(), (lse_p - top[:, rows]).exp()
    num = (o_d.float() * w_d.t()[..., None]).index_add_(0, rows, o_p.float() * w_p.t()[..., None])
    return (num / w_d.index_add(1, rows, w_p).t()[..., None]).to(o_d.dtype)


def per_layer_us(fn):
    """The mean time of one call among LAYERS in one CUDA graph, replayed 20 times."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(LAYERS):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        graph.replay()
    torch.cuda.synchronize()
    return round((time.perf_counter() - start) / 20 / LAYERS * 1e6, 2)


def rows_keep_bits(kernel, seqs, rows, keys, causal):
    """The first sequence's output alone, and with 7 more sequences beside it: the largest |Δ|."""
    q, k, v, cu_q, cu_k = tensors(seqs + 7, rows, keys, seed=3)
    n_q, n_k = seqs * rows, seqs * keys
    if kernel == "flash":
        alone = flash(q[:n_q], k[:n_k], v[:n_k], cu_q[:seqs + 1], cu_k[:seqs + 1], rows, keys, causal)[0]
        beside = flash(q, k, v, cu_q, cu_k, rows, keys, causal)[0][:n_q]
    else:
        alone = cudnn(q[:n_q], k[:n_k], v[:n_k], seqs, rows, keys, causal)
        beside = cudnn(q, k, v, seqs + 7, rows, keys, causal)[:seqs]
    return float((alone.float() - beside.float()).abs().max())


def cpu_check():
    """The chunked form against the tier whole, on the CPU (fp32 inputs, FA2's float64 stand-in): sequences alone and
    side by side, chunks that divide the keys and chunks that do not, a state shorter than one chunk. Exits 1 on a
    difference past float32's rounding."""
    global DEVICE
    DEVICE = "cpu"
    torch.manual_seed(0)
    cases = []
    for seqs, n, chunk in [(1, 1000, 256), (1, 300, 128), (3, 257, 128), (2, 100, 256)]:
        q, k, v, cu, _ = tensors(seqs, n, n)
        plan = chunk_plan(seqs, n, chunk)
        whole = flash(q, k, v, cu, cu, n, n, True)[0]
        diff = float((chunked_flash(q, k, v, plan).double() - whole.double()).abs().max())
        cases.append({"sequences": seqs, "keys": n, "chunk": chunk, "prefix_rows": plan["rows"].numel(), "max_diff": diff, "ok": diff < 1e-5})
    # The grid cases: each case's first run, the same work in every case of its group, gives the same rows whatever
    # runs, empty sequences and max_q are launched beside it.
    grid_diffs = {}
    for group, group_cases in grid_cases(scale=8).items():
        first_rows = group_cases[0][1][0][0]
        alone = grid_call(*group_cases[0][1:])()[0][:first_rows].double()
        grid_diffs[group] = max(float((grid_call(*c[1:])()[0][:first_rows].double() - alone).abs().max()) for c in group_cases)
    grids_ok = all(d == 0.0 for d in grid_diffs.values())
    # The long state's cuts: each covers the state's keys once, and its launch runs (a smaller state here).
    cuts = long_state_chunkings(keys=400, rows=3)
    cuts_ok = all(sum(k for _, k in runs) == 400 and grid_call(runs, 0, 3, False)()[0].shape[0] == 3 * len(runs) for runs in cuts.values())
    ok = all(c["ok"] for c in cases) and grids_ok and cuts_ok
    print(json.dumps({"cases": cases, "grid_cases_first_run_max_diff": grid_diffs, "long_state_cuts_ok": cuts_ok, "ok": ok}))
    sys.exit(0 if ok else 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out")
    parser.add_argument("--cpu-check", action="store_true", help="check the chunked form and the grid cases on the CPU (no GPU needed), then exit")
    parser.add_argument("--grids", action="store_true", help="time the grid cases alone (the window's probes step)")
    args = parser.parse_args()
    if args.cpu_check:
        cpu_check()
    if args.grids:
        result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "layers_in_graph": LAYERS, "grids": grids()}
        if args.out:
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
        return
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "layers_in_graph": LAYERS, "tiers": {}}
    for name, (seqs, rows, keys, causal) in TIERS.items():
        q, k, v, cu_q, cu_k = tensors(seqs, rows, keys)
        bytes_read = (q.numel() + 2 * k.numel()) * 2
        entry = {"sequences": seqs, "rows": rows, "keys": keys, "causal": causal, "bytes_us_at_4_8_TBps": round(bytes_read / 4.8e6, 2)}
        for kernel, fn in (("flash", lambda: flash(q, k, v, cu_q, cu_k, rows, keys, causal)),
                           ("efficient", lambda: efficient(q, k, v, cu_q, cu_k, rows, keys, causal)),
                           ("cudnn", lambda: cudnn(q, k, v, seqs, rows, keys, causal and rows == keys)),
                           ("matmul", lambda: matmul(q, k, v, seqs, rows, keys, causal))):
            if kernel == "matmul" and seqs * rows * keys * HEADS > 1 << 28:
                entry[f"{kernel}_us"] = "skipped: its scores would take over a GiB"
                continue
            try:
                entry[f"{kernel}_us"] = per_layer_us(fn)
            except Exception as e:  # a kernel this torch or this shape does not have
                entry[f"{kernel}_us"] = f"error: {repr(e)[:200]}"
        for kernel in ("flash", "cudnn"):
            try:
                entry[f"{kernel}_beside_others_max_diff"] = rows_keep_bits(kernel, seqs, rows, keys, causal and (kernel == "flash" or rows == keys))
            except Exception as e:
                entry[f"{kernel}_beside_others_max_diff"] = f"error: {repr(e)[:200]}"
        result["tiers"][name] = entry
        print(name, json.dumps(entry), flush=True)
    result["chunked"] = {}
    for name, (seqs, n, chunk) in CHUNKED.items():
        q, k, v, cu, _ = tensors(seqs, n, n)
        plan = chunk_plan(seqs, n, chunk)
        entry = {"sequences": seqs, "keys": n, "chunk": chunk, "prefix_rows": plan["rows"].numel()}
        try:
            entry["whole_flash_us"] = per_layer_us(lambda: flash(q, k, v, cu, cu, n, n, True))
            entry["chunked_flash_us"] = per_layer_us(lambda: chunked_flash(q, k, v, plan, merged=False))
            entry["chunked_with_torch_merge_us"] = per_layer_us(lambda: chunked_flash(q, k, v, plan))
            # The same attention, another order of its sums: within bf16's rounding of the whole, not its bits.
            entry["chunked_vs_whole_max_diff"] = float((chunked_flash(q, k, v, plan).float() - flash(q, k, v, cu, cu, n, n, True)[0].float()).abs().max())
        except Exception as e:
            entry["error"] = repr(e)[:300]
        result["chunked"][name] = entry
        print(name, json.dumps(entry), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
