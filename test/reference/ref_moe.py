"""Float64 reference forwards of the mixture-of-experts families: Qwen3-MoE, Mixtral and Qwen2-MoE, written from
transformers' descriptions of them as plain tensor code apart from the engine, reading the checkpoint by hand
(ref_model.py's reader).

Attention is each family's dense one: Qwen3's (per-head q/k RMSNorms), Mistral's (a sliding window when set),
Qwen2's (q/k/v biases). A sparse layer's MLP (transformers' SparseMoeBlock):
  * router logits = x @ gate^T over all experts; probabilities = softmax over all of them;
  * the top num_experts_per_tok experts by probability (ties to the lower index);
  * their probabilities renormalised to sum 1 for Mixtral always, for the Qwen families when norm_topk_prob;
  * output = sum over those experts of probability x down(silu(gate_e(x)) * up_e(x));
  * Qwen2-MoE adds sigmoid(x @ shared_expert_gate^T) x shared_expert(x) for every token.
A layer is sparse unless it is in mlp_only_layers or (index + 1) is not a multiple of decoder_sparse_step; the
others have the dense MLP of intermediate_size. Experts are read as stored per expert (experts.E.gate_proj /
up_proj / down_proj; Mixtral's block_sparse_moe.experts.E.w1 / w3 / w2) or stacked as transformers 5 keeps them
(experts.gate_up_proj [E, 2 width, hidden], experts.down_proj [E, hidden, width]).
"""
import math

import torch

from ref_model import CheckpointReader, inverse_frequencies, rms_norm, rotate_half


class MoeModel(CheckpointReader):
    FAMILIES = ("qwen3_moe", "mixtral", "qwen2_moe")

    def __init__(self, folder):
        super().__init__(folder)
        c = self.c
        self.mixtral = self.kind == "mixtral"
        # Either name transformers reads it by (its configs' attribute_map): transformers 5 writes Qwen3-MoE's as num_local_experts.
        self.experts = c.get("num_local_experts", c.get("num_experts"))
        self.top_k = c["num_experts_per_tok"]
        self.renormalize = self.mixtral or c.get("norm_topk_prob", False)
        uses_window = self.mixtral or c.get("use_sliding_window", False)
        self.window = int(c["sliding_window"]) if uses_window and c.get("sliding_window") else 0

    def sparse(self, i):
        if self.mixtral:
            return True
        return i not in (self.c.get("mlp_only_layers") or []) and (i + 1) % self.c.get("decoder_sparse_step", 1) == 0

    def attention(self, i, x, cos, sin, mask):
        w, p, T = self.w, f"model.layers.{i}.", x.shape[0]
        proj = lambda n: x @ w[p + f"self_attn.{n}_proj.weight"].t() + w.get(p + f"self_attn.{n}_proj.bias", 0.0)  # noqa: E731
        q, k, v = proj("q").reshape(T, self.nh, self.hd), proj("k").reshape(T, self.nkv, self.hd), proj("v").reshape(T, self.nkv, self.hd)
        if p + "self_attn.q_norm.weight" in w:
            q, k = rms_norm(q, w[p + "self_attn.q_norm.weight"], self.eps), rms_norm(k, w[p + "self_attn.k_norm.weight"], self.eps)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = self.nh // self.nkv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(self.hd)
        scores = scores.masked_fill(~mask.unsqueeze(0), float("-inf"))
        attn = torch.einsum("hqk,khd->qhd", torch.softmax(scores, -1), v).reshape(T, self.nh * self.hd)
        return attn @ w[p + "self_attn.o_proj.weight"].t()

    @staticmethod
    def gated(x, gate, up, down):
        return (torch.nn.functional.silu(x @ gate.t()) * (x @ up.t())) @ down.t()

    def expert_weights(self, p, e):
        """Expert e's (gate, up, down) of the sparse block under p."""
        w = self.w
        if p + "experts.gate_up_proj" in w:
            gate, up = w[p + "experts.gate_up_proj"][e].chunk(2, dim=0)
            return gate, up, w[p + "experts.down_proj"][e]
        names = ("w1", "w3", "w2") if self.mixtral else ("gate_proj", "up_proj", "down_proj")
        return tuple(w[f"{p}experts.{e}.{n}.weight"] for n in names)

    def mlp(self, i, x):
        w, p = self.w, f"model.layers.{i}."
        if not self.sparse(i):
            return self.gated(x, w[p + "mlp.gate_proj.weight"], w[p + "mlp.up_proj.weight"], w[p + "mlp.down_proj.weight"])
        block = p + ("block_sparse_moe." if self.mixtral else "mlp.")
        probs = torch.softmax(x @ w[block + "gate.weight"].t(), -1)
        chosen = torch.sort(probs, dim=-1, descending=True, stable=True).indices[:, : self.top_k]
        weights = probs.gather(1, chosen)
        if self.renormalize:
            weights = weights / weights.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        for t in range(x.shape[0]):
            for j in range(self.top_k):
                out[t] += weights[t, j] * self.gated(x[t : t + 1], *self.expert_weights(block, int(chosen[t, j])))[0]
        if block + "shared_expert_gate.weight" in w:
            s = block + "shared_expert."
            shared = self.gated(x, w[s + "gate_proj.weight"], w[s + "up_proj.weight"], w[s + "down_proj.weight"])
            out = out + torch.sigmoid(x @ w[block + "shared_expert_gate.weight"].t()) * shared
        return out

    def hidden(self, ids):
        """Final-normed hidden states of one sequence, [T, hidden] float64."""
        T = ids.shape[0]
        pos = torch.arange(T)
        angles = pos.to(torch.float64).unsqueeze(1) * inverse_frequencies(self.c, self.hd).unsqueeze(0)
        angles = torch.cat([angles, angles], -1)
        cos, sin = angles.cos().unsqueeze(1), angles.sin().unsqueeze(1)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        if self.window:
            mask = mask & ((pos.unsqueeze(1) - pos.unsqueeze(0)) < self.window)
        x = self.w["model.embed_tokens.weight"][ids]
        for i in range(self.c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            x = x + self.attention(i, rms_norm(x, self.w[p + "input_layernorm.weight"], self.eps), cos, sin, mask)
            x = x + self.mlp(i, rms_norm(x, self.w[p + "post_attention_layernorm.weight"], self.eps))
        return rms_norm(x, self.w["model.norm.weight"], self.eps)

    def logits(self, hidden):
        return hidden @ self.lm_head.t()
