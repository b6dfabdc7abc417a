"""Float64 reference forwards of the families added after the first four: Gemma 3 (text), Phi-3
(Phi-4-mini's shape), OLMo 2 and SmolLM3. Written from the models' papers and transformers'
descriptions of them, as plain tensor code apart from the engine, reading the checkpoint by hand
(ref_model.py's reader): the engine's parity tests compare against it (forward.py).

What each family changes, against the Llama layer of ref_model.py:
  * Gemma 3: embeddings times sqrt(hidden); RMSNorms scale by (1 + weight); four norms a layer
    (before and after attention and MLP); per-head q/k norms; attention scale
    query_pre_attn_scalar^-1/2; sliding-window layers with their own RoPE base
    (rope_local_base_freq) and global layers with rope_theta and linear scaling; scores and final
    logits soft-capped (cap * tanh(x / cap)) when set; GELU-tanh gating; tied embeddings.
  * Phi-3: q/k/v and gate/up stored fused; RoPE over the first partial_rotary_factor of each head;
    longrope: short factors, or long ones for a sequence longer than
    original_max_position_embeddings, and cos/sin times sqrt(1 + ln(s) / ln(original)), s the
    ratio of max_position_embeddings to it.
  * OLMo 2: no norm before the sublayers, one after each (on its output, before the residual
    add); q/k norms over the whole projections.
  * SmolLM3: layers whose no_rope_layers entry is 0 apply no RoPE.

RoPE's settings are read from either layout of config.json: transformers 5's rope_parameters (one object, or
one per layer type for Gemma 3, with the theta inside) or transformers 4's rope_theta, rope_scaling and
rope_local_base_freq at the top (rope_settings below; bench/gpu/make_models.py writes the first, the test
models the second; test/engine/reference-config.test.ts checks both give the same logits).
"""
import math

import torch

from ref_model import CheckpointReader, rms_norm, rotate_half
from ref_moe import MoeModel


def inverse_frequencies(params, dim, long_factors):
    theta = params.get("rope_theta", 10000.0)
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    kind = params["rope_type"]
    if kind == "linear":
        inv = inv / params["factor"]
    elif kind == "longrope":
        inv = inv / torch.tensor(params["long_factor" if long_factors else "short_factor"], dtype=torch.float64)
    return inv


def rope_settings(c, layer_type):
    """(params, rotary fraction) of a layer of `layer_type` ("full_attention" or "sliding_attention"): params holds
    rope_theta, rope_type and the scaling's fields, from transformers 5's rope_parameters or 4's top-level fields."""
    v5 = c.get("rope_parameters") or {}
    if "full_attention" in v5 or "sliding_attention" in v5:  # one per layer type (Gemma 3)
        params = dict(v5.get(layer_type) or {})
    elif v5:
        params = dict(v5)
    elif layer_type == "sliding_attention":  # transformers 4's Gemma 3 local layers: their own base, no scaling
        params = {"rope_theta": c.get("rope_local_base_freq", 10000.0)}
    else:
        params = dict(c.get("rope_scaling") or {})
        params.setdefault("rope_theta", c.get("rope_theta", 10000.0))
    params.setdefault("rope_theta", 10000.0)
    params["rope_type"] = params.get("rope_type", params.get("type", "default"))
    return params, float(params.get("partial_rotary_factor", c.get("partial_rotary_factor", 1.0)))


class FamilyModel(CheckpointReader):
    FAMILIES = ("gemma3_text", "phi3", "olmo2", "smollm3")

    def __init__(self, folder):
        super().__init__(folder)
        self.rotary = int(self.hd * rope_settings(self.c, "full_attention")[1])
        self.gemma = self.kind == "gemma3_text"

    def norm(self, x, name):
        weight = self.w[name] + (1.0 if self.gemma else 0.0)
        return rms_norm(x, weight, self.eps)

    def layer_rope(self, i, length):
        """(cos/sin angle source, attention factor) for layer i, or None where it applies no RoPE."""
        c = self.c
        if self.kind == "smollm3" and c["no_rope_layers"][i] == 0:
            return None
        params, _ = rope_settings(c, "sliding_attention" if self.sliding(i) else "full_attention")
        if params["rope_type"] == "longrope":
            original = params.get("original_max_position_embeddings", c.get("original_max_position_embeddings"))
            factor = params.get("factor", c["max_position_embeddings"] / original)
            attention = params.get("attention_factor", 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original)))
            return params, length > original, attention
        return params, False, 1.0

    def sliding(self, i):
        return self.gemma and self.c["layer_types"][i] == "sliding_attention"

    def attention(self, i, x, pos, mask):
        w, p, T = self.w, f"model.layers.{i}.", x.shape[0]
        if self.kind == "phi3":
            q_dim, kv_dim = self.nh * self.hd, self.nkv * self.hd
            qkv = x @ w[p + "self_attn.qkv_proj.weight"].t()
            q, k, v = qkv[:, :q_dim], qkv[:, q_dim : q_dim + kv_dim], qkv[:, q_dim + kv_dim :]
        else:
            q, k, v = (x @ w[p + f"self_attn.{n}_proj.weight"].t() for n in "qkv")
        if self.kind == "olmo2":
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], self.eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], self.eps)
        q, k, v = q.reshape(T, self.nh, self.hd), k.reshape(T, self.nkv, self.hd), v.reshape(T, self.nkv, self.hd)
        if self.gemma:
            q, k = self.norm(q, p + "self_attn.q_norm.weight"), self.norm(k, p + "self_attn.k_norm.weight")
        rope = self.layer_rope(i, T)
        if rope is not None:
            params, long_factors, factor = rope
            angles = pos.to(torch.float64).unsqueeze(1) * inverse_frequencies(params, self.rotary, long_factors).unsqueeze(0)
            angles = torch.cat([angles, angles], -1)
            cos, sin = (angles.cos() * factor).unsqueeze(1), (angles.sin() * factor).unsqueeze(1)
            r = self.rotary
            q = torch.cat([q[..., :r] * cos + rotate_half(q[..., :r]) * sin, q[..., r:]], -1)
            k = torch.cat([k[..., :r] * cos + rotate_half(k[..., :r]) * sin, k[..., r:]], -1)
        rep = self.nh // self.nkv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scale = self.c["query_pre_attn_scalar"] ** -0.5 if self.gemma else self.hd ** -0.5
        scores = torch.einsum("qhd,khd->hqk", q, k) * scale
        # Gemma 3's attn_logit_softcapping is not applied: transformers' Gemma3Attention stores it and never passes it on.
        if self.sliding(i):
            mask = mask & ((pos.unsqueeze(1) - pos.unsqueeze(0)) < self.c["sliding_window"])
        scores = scores.masked_fill(~mask.unsqueeze(0), float("-inf"))
        attn = torch.einsum("hqk,khd->qhd", torch.softmax(scores, -1), v).reshape(T, self.nh * self.hd)
        return attn @ w[p + "self_attn.o_proj.weight"].t()

    def mlp(self, i, x):
        w, p = self.w, f"model.layers.{i}."
        if self.kind == "phi3":
            gate, up = (x @ w[p + "mlp.gate_up_proj.weight"].t()).chunk(2, dim=-1)
        else:
            gate, up = x @ w[p + "mlp.gate_proj.weight"].t(), x @ w[p + "mlp.up_proj.weight"].t()
        act = torch.nn.functional.gelu(gate, approximate="tanh") if self.gemma else torch.nn.functional.silu(gate)
        return (act * up) @ w[p + "mlp.down_proj.weight"].t()

    def hidden(self, ids):
        """Final-normed hidden states of one sequence, [T, hidden] float64."""
        T = ids.shape[0]
        pos = torch.arange(T)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        x = self.w["model.embed_tokens.weight"][ids]
        if self.gemma:
            x = x * math.sqrt(self.c["hidden_size"])
        for i in range(self.c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            if self.kind == "olmo2":
                x = x + self.norm(self.attention(i, x, pos, mask), p + "post_attention_layernorm.weight")
                x = x + self.norm(self.mlp(i, x), p + "post_feedforward_layernorm.weight")
            elif self.gemma:
                x = x + self.norm(self.attention(i, self.norm(x, p + "input_layernorm.weight"), pos, mask), p + "post_attention_layernorm.weight")
                x = x + self.norm(self.mlp(i, self.norm(x, p + "pre_feedforward_layernorm.weight")), p + "post_feedforward_layernorm.weight")
            else:
                x = x + self.attention(i, self.norm(x, p + "input_layernorm.weight"), pos, mask)
                x = x + self.mlp(i, self.norm(x, p + "post_attention_layernorm.weight"))
        return self.norm(x, "model.norm.weight")

    def logits(self, hidden):
        out = hidden @ self.lm_head.t()
        cap = self.c.get("final_logit_softcapping") if self.gemma else None
        return torch.tanh(out / cap) * cap if cap else out


def family_model(folder, model_type):
    """The reference of a family written out here or in ref_moe.py (each with .hidden(ids) and .logits(hidden)), or
    None where ref_model.py's Llama-shaped RefModel is the reference."""
    if model_type in FamilyModel.FAMILIES:
        return FamilyModel(folder)
    if model_type in MoeModel.FAMILIES:
        return MoeModel(folder)
    return None
