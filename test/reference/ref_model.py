"""An independent, plain PyTorch implementation of the Llama/Mistral/Qwen2/Qwen3
decoder, reading an HF checkpoint's safetensors by hand (no transformers).

Used two ways:
  * in float64 as the parity reference for the engine (forward.py);
  * scripted in float32 as the TorchScript test model (export_torchscript.py),
    following the engine's TorchScript contract (docs/engine.md, "TorchScript models"):
      forward(input_ids[T], position_ids[T], attention_mask[T, T] bool) -> hidden[T, H]
      lm_head_weight() -> [V, H]
"""
import json
import math
import os
import struct

import numpy as np
import torch
from torch import nn

_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(data, dtype=_DTYPES[info["dtype"]], count=(b - a) // np.dtype(_DTYPES[info["dtype"]]).itemsize, offset=base + a)
        if info["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = torch.from_numpy(arr.astype(np.float64)).reshape(info["shape"])
    return out


def read_checkpoint(folder):
    config = json.load(open(os.path.join(folder, "config.json")))
    index = os.path.join(folder, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    weights = {}
    for f in files:
        weights.update(read_safetensors(os.path.join(folder, f)))
    return config, weights


def inverse_frequencies(config, head_dim):
    # transformers 5 keeps theta and scaling in one rope_parameters object.
    params = config.get("rope_parameters") or {}
    theta = params.get("rope_theta", config.get("rope_theta", 10000.0))
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    rs = config.get("rope_scaling") or params
    if rs and rs.get("rope_type", rs.get("type")) == "llama3":
        old = rs["original_max_position_embeddings"]
        low_wl, high_wl = old / rs["low_freq_factor"], old / rs["high_freq_factor"]
        wl = 2 * math.pi / inv
        scaled = torch.where(wl > low_wl, inv / rs["factor"], inv)
        smooth = (old / wl - rs["low_freq_factor"]) / (rs["high_freq_factor"] - rs["low_freq_factor"])
        smoothed = (1 - smooth) * scaled / rs["factor"] + smooth * scaled
        medium = (wl >= high_wl) & (wl <= low_wl)
        inv = torch.where(medium, smoothed, scaled)
    return inv


class CheckpointReader:
    """What the plain-code references (ref_families.py, ref_moe.py) read first: the checkpoint, its family, the
    attention's sizes, the norms' epsilon and the lm_head (the embeddings where tied)."""

    def __init__(self, folder):
        c, w = read_checkpoint(folder)
        self.c, self.w = c, w
        self.kind = c["model_type"]
        self.nh, self.nkv = c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = c.get("head_dim") or c["hidden_size"] // self.nh
        self.eps = float(c["rms_norm_eps"])
        self.lm_head = w.get("lm_head.weight", w["model.embed_tokens.weight"])


def rms_norm(x, w, eps: float):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)


class Layer(nn.Module):
    def __init__(self, w, p, config, head_dim):
        super().__init__()
        h = config["hidden_size"]
        nh, nkv = config["num_attention_heads"], config["num_key_value_heads"]
        P = lambda n: nn.Parameter(w[p + n], requires_grad=False)
        zeros = lambda n: nn.Parameter(torch.zeros(n, dtype=torch.float64), requires_grad=False)
        ones = lambda n: nn.Parameter(torch.ones(n, dtype=torch.float64), requires_grad=False)
        self.input_norm, self.post_norm = P("input_layernorm.weight"), P("post_attention_layernorm.weight")
        self.wq, self.wk, self.wv, self.wo = P("self_attn.q_proj.weight"), P("self_attn.k_proj.weight"), P("self_attn.v_proj.weight"), P("self_attn.o_proj.weight")
        bias = p + "self_attn.q_proj.bias" in w
        self.bq = P("self_attn.q_proj.bias") if bias else zeros(nh * head_dim)
        self.bk = P("self_attn.k_proj.bias") if bias else zeros(nkv * head_dim)
        self.bv = P("self_attn.v_proj.bias") if bias else zeros(nkv * head_dim)
        qk = p + "self_attn.q_norm.weight" in w
        self.qk_norm = qk
        self.q_norm = P("self_attn.q_norm.weight") if qk else ones(head_dim)
        self.k_norm = P("self_attn.k_norm.weight") if qk else ones(head_dim)
        self.w_gate, self.w_up, self.w_down = P("mlp.gate_proj.weight"), P("mlp.up_proj.weight"), P("mlp.down_proj.weight")
        self.nh, self.nkv, self.hd, self.eps = nh, nkv, head_dim, float(config["rms_norm_eps"])

    def forward(self, x, cos, sin, mask):
        T = x.shape[0]
        h = rms_norm(x, self.input_norm, self.eps)
        q = (h @ self.wq.t() + self.bq).view(T, self.nh, self.hd)
        k = (h @ self.wk.t() + self.bk).view(T, self.nkv, self.hd)
        v = (h @ self.wv.t() + self.bv).view(T, self.nkv, self.hd)
        if self.qk_norm:
            q = rms_norm(q, self.q_norm, self.eps)
            k = rms_norm(k, self.k_norm, self.eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.nh // self.nkv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(self.hd)
        scores = scores.masked_fill(~mask.unsqueeze(0), float("-inf"))
        attn = torch.einsum("hqk,khd->qhd", torch.softmax(scores, -1), v).reshape(T, self.nh * self.hd)
        x = x + attn @ self.wo.t()
        h = rms_norm(x, self.post_norm, self.eps)
        return x + (torch.nn.functional.silu(h @ self.w_gate.t()) * (h @ self.w_up.t())) @ self.w_down.t()


class RefModel(nn.Module):
    def __init__(self, folder):
        super().__init__()
        config, w = read_checkpoint(folder)
        hd = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        self.embed = nn.Parameter(w["model.embed_tokens.weight"], requires_grad=False)
        self.norm = nn.Parameter(w["model.norm.weight"], requires_grad=False)
        self.lm_head = nn.Parameter(w.get("lm_head.weight", w["model.embed_tokens.weight"]), requires_grad=False)
        self.layers = nn.ModuleList([Layer(w, f"model.layers.{i}.", config, hd) for i in range(config["num_hidden_layers"])])
        self.inv_freq = nn.Parameter(inverse_frequencies(config, hd), requires_grad=False)
        uses_window = config.get("model_type") == "mistral" or config.get("use_sliding_window", False)
        self.window = int(config["sliding_window"]) if uses_window and config.get("sliding_window") else 0
        self.eps = float(config["rms_norm_eps"])

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        dtype = self.embed.dtype
        # Angles in float64 whatever the module dtype, as the engine does.
        angles = position_ids.to(torch.float64).unsqueeze(1) * self.inv_freq.to(torch.float64).unsqueeze(0)
        angles = torch.cat([angles, angles], -1)
        cos, sin = angles.cos().to(dtype).unsqueeze(1), angles.sin().to(dtype).unsqueeze(1)
        mask = attention_mask
        if self.window > 0:
            mask = mask & ((position_ids.unsqueeze(1) - position_ids.unsqueeze(0)) < self.window)
        x = self.embed[input_ids]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return rms_norm(x, self.norm, self.eps)

    @torch.jit.export
    def lm_head_weight(self) -> torch.Tensor:
        return self.lm_head
