"""The honest peer of the GPU benchmark: the same model's layer ops written plainly in PyTorch, in bf16, each workload
captured once as one CUDA graph and replayed (check.py's `torch_graphs`). What an engineer gets from an afternoon with
PyTorch: no engine, no paging, no fused kernels of its own, but no Python or launch overhead either. On the CPU (CI, or
no GPU) the same code runs eagerly, which is how its arithmetic is checked against tqserve's.

Per layer: RMSNorm; one GEMM for q, k and v; per-head RMSNorm (Qwen3); RoPE (rotate-half); SDPA (grouped-query
where this torch has it) over the state's cached keys and values and the tokens' own; o; RMSNorm; one GEMM for gate
and up; SiLU(gate) * up; down. Label logits: the final norm of the last position against the labels' rows of lm_head.
"""
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "test", "reference"))
from ref_model import inverse_frequencies, read_checkpoint  # noqa: E402


def load_checkpoint(folder):
    """(config, weights): safetensors' own reader where installed (it comes with transformers), else the references'."""
    try:
        from safetensors.torch import load_file
        index = os.path.join(folder, "model.safetensors.index.json")
        files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
        weights = {}
        for f in files:
            weights.update(load_file(os.path.join(folder, f)))
        return json.load(open(os.path.join(folder, "config.json"))), weights
    except ImportError:
        return read_checkpoint(folder)


def rms_norm(x, w, eps):
    """As transformers computes it: in fp32, the weight applied after the cast back."""
    f = x.float()
    return w * (f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)


class PlainModel:
    """A Llama-family decoder (Llama, Qwen2, Qwen3) over [batch, tokens] ids, with an optional cache of a state's keys
    and values that every row of the batch attends to."""

    def __init__(self, folder, dtype, device):
        c, w = load_checkpoint(folder)
        self.dtype, self.device = dtype, device
        self.nh, self.nkv = c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c.get("head_dim") or c["hidden_size"] // self.nh
        self.eps = float(c["rms_norm_eps"])
        W = lambda name: w[name].to(device=device, dtype=dtype).contiguous()  # noqa: E731
        self.embed = W("model.embed_tokens.weight")
        self.lm_head = W("lm_head.weight") if "lm_head.weight" in w else self.embed
        self.final_norm = W("model.norm.weight")
        self.layers = []
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            qkv_bias = p + "self_attn.q_proj.bias" in w
            self.layers.append({
                "in_norm": W(p + "input_layernorm.weight"), "post_norm": W(p + "post_attention_layernorm.weight"),
                "qkv": torch.cat([W(p + f"self_attn.{n}_proj.weight") for n in "qkv"]),
                "qkv_bias": torch.cat([W(p + f"self_attn.{n}_proj.bias") for n in "qkv"]) if qkv_bias else None,
                "q_norm": W(p + "self_attn.q_norm.weight") if p + "self_attn.q_norm.weight" in w else None,
                "k_norm": W(p + "self_attn.k_norm.weight") if p + "self_attn.k_norm.weight" in w else None,
                "o": W(p + "self_attn.o_proj.weight"),
                "gate_up": torch.cat([W(p + "mlp.gate_proj.weight"), W(p + "mlp.up_proj.weight")]),
                "down": W(p + "mlp.down_proj.weight"),
            })
        inv = inverse_frequencies(c, self.hd).float()
        angles = torch.outer(torch.arange(c.get("max_position_embeddings", 4096), dtype=torch.float32), inv)
        angles = torch.cat([angles, angles], -1)
        self.cos, self.sin = angles.cos().to(device, dtype), angles.sin().to(device, dtype)
        self.gqa = self._sdpa_takes_gqa()

    def _sdpa_takes_gqa(self):
        """Whether this torch's SDPA takes grouped-query attention itself (else the keys are repeated per query head)."""
        if not hasattr(F, "scaled_dot_product_attention"):
            return None  # torch 1.x: the attention written out
        q = torch.zeros(1, self.nh, 2, self.hd, device=self.device, dtype=self.dtype)
        kv = torch.zeros(1, self.nkv, 3, self.hd, device=self.device, dtype=self.dtype)
        try:
            F.scaled_dot_product_attention(q, kv, kv, attn_mask=torch.ones(2, 3, dtype=torch.bool, device=self.device), enable_gqa=True)
            return True
        except (TypeError, RuntimeError):
            return False

    def attend(self, q, k, v):
        """q [B, Hq, Tq, D] over k, v [B, Hkv, Tk, D], the queries the last Tq of the Tk positions (causal among them)."""
        tq, tk = q.shape[2], k.shape[2]
        visible = torch.ones(tq, tk, dtype=torch.bool, device=q.device).tril(tk - tq)  # bottom-right causal
        if not self.gqa:  # the key heads repeated per query head, where SDPA does not take grouped queries itself
            k, v = k.repeat_interleave(self.nh // self.nkv, 1), v.repeat_interleave(self.nh // self.nkv, 1)
        if self.gqa is None:  # torch 1.x: no SDPA, the attention written out
            scores = ((q.float() @ k.float().transpose(-1, -2)) / math.sqrt(self.hd)).masked_fill(~visible, float("-inf"))
            return (torch.softmax(scores, -1) @ v.float()).to(q.dtype)
        # Without a mask where none is needed (one query, or a prefill's top-left causal), so SDPA can take its flash kernel.
        mask = None if tq == 1 or tq == tk else visible
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=tq == tk and tq > 1, **({"enable_gqa": True} if self.gqa else {}))

    def hidden(self, ids, cache=None, keep=False):
        """The final norm of each row's last position, [B, H]; with keep, also the keys and values of every layer
        ([B, Hkv, T, D] each, after RoPE) as a cache for later calls. cache: a state's, shared by every row."""
        B, T = ids.shape
        start = 0 if cache is None else cache[0][0].shape[2]
        cos, sin = self.cos[start:start + T], self.sin[start:start + T]
        x = self.embed[ids]
        kept = []
        for i, L in enumerate(self.layers):
            h = rms_norm(x, L["in_norm"], self.eps)
            qkv = F.linear(h, L["qkv"], L["qkv_bias"])
            q, k, v = qkv.split([self.nh * self.hd, self.nkv * self.hd, self.nkv * self.hd], -1)
            q, k, v = q.view(B, T, self.nh, self.hd), k.view(B, T, self.nkv, self.hd), v.view(B, T, self.nkv, self.hd)
            if L["q_norm"] is not None:
                q, k = rms_norm(q, L["q_norm"], self.eps), rms_norm(k, L["k_norm"], self.eps)
            q = (q * cos[:, None] + rotate_half(q) * sin[:, None]).transpose(1, 2)
            k = (k * cos[:, None] + rotate_half(k) * sin[:, None]).transpose(1, 2)
            v = v.transpose(1, 2)
            if keep:
                kept.append((k, v))
            if cache is not None:
                ck, cv = cache[i]
                k = torch.cat([ck.expand(B, -1, -1, -1), k], 2)
                v = torch.cat([cv.expand(B, -1, -1, -1), v], 2)
            a = self.attend(q, k, v).transpose(1, 2).reshape(B, T, self.nh * self.hd)
            x = x + F.linear(a, L["o"])
            h = rms_norm(x, L["post_norm"], self.eps)
            gate, up = F.linear(h, L["gate_up"]).chunk(2, -1)
            x = x + F.linear(F.silu(gate) * up, L["down"])
        last = rms_norm(x[:, -1], self.final_norm, self.eps)
        return (last, kept) if keep else last

    def label_logits(self, last, labels):
        return (last.float() @ self.lm_head[labels].float().t())


def replayed(fn, cuda):
    """fn captured once as one CUDA graph (after warm-up on a side stream, as torch.cuda.graphs asks), returned as a
    function that replays it and brings its result to the host. Without CUDA, fn itself, eagerly."""
    if not cuda:
        return lambda: fn().cpu()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()

    def replay():
        graph.replay()
        return out.cpu()
    return replay


def timed(fn, runs, cuda):
    fn()
    times = []
    for _ in range(runs):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def benchmark(folder, state, questions, labels, many, runs, dtype=torch.bfloat16):
    """The benchmark's workloads, each one graph: check.py's keys (cold_prefill_ms, state_16_questions_ms,
    warm_question_ms, throughput) and the label logits to compare with the other engines'."""
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    model = PlainModel(folder, dtype, device)
    tensor = lambda x: torch.tensor(x, device=device)  # noqa: E731
    labels_t = tensor(labels)
    r = {}
    with torch.inference_mode():
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        cold_ids = tensor([state])
        cold = replayed(lambda: model.label_logits(model.hidden(cold_ids), labels_t), cuda)
        r["cold_prefill_ms"] = timed(cold, runs, cuda)
        r["label_logits_cold"] = cold()[0].tolist()

        state_ids, question_ids = tensor([state]), tensor(questions)

        def state_and_questions():
            _, cache = model.hidden(state_ids, keep=True)
            return model.label_logits(model.hidden(question_ids, cache), labels_t)
        sixteen = replayed(state_and_questions, cuda)
        r["state_16_questions_ms"] = timed(sixteen, runs, cuda)

        _, cache = model.hidden(state_ids, keep=True)  # the state's keys and values, once, outside the timing
        one = tensor(questions[:1])
        warm = replayed(lambda: model.label_logits(model.hidden(one, cache), labels_t), cuda)
        r["warm_question_ms"] = timed(warm, runs, cuda)
        r["label_logits_warm"] = warm()[0].tolist()
        del cache
        r["memory_bytes"] = torch.cuda.max_memory_reserved() if cuda else 0

        batch = tensor([s + questions[0][:1] for s in many])
        r["throughput"] = {}
        for size in sorted({min(8, len(many)), len(many)}):
            chunks = [replayed(lambda c=c: model.label_logits(model.hidden(c), labels_t), cuda) for c in batch.split(size)]
            ms = timed(lambda: [c() for c in chunks], 3, cuda)
            r["throughput"][size] = {"tokens_per_s": batch.numel() / (ms / 1000)}
            del chunks
        r["throughput_tokens_per_s"] = max(v["tokens_per_s"] for v in r["throughput"].values())
    r["sdpa"] = {True: "SDPA, grouped-query", False: "SDPA, keys repeated per head", None: "attention written out (no SDPA)"}[model.gqa]
    r["graphs"] = cuda
    del model
    if cuda:
        torch.cuda.empty_cache()
    return r
