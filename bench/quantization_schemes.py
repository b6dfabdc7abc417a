"""Which 8-bit rounding moves the label probabilities, and how much finer scales would buy (not a test).

    /usr/bin/python3 bench/quantization_schemes.py models/bench-llama    (npm run testmodels bench-llama first)

A Llama checkpoint's forward in fp32 (test/reference/ref_model.py's weights and pieces, plain PyTorch), its
linear layers' operands rounded as each scheme says, on 8 prompts of 120-240 token ids drawn from a fixed
seed; the 8 label logits at the last position against the unrounded forward's. Schemes: this engine's int8
(weights per output channel, activations per row: docs/quantization.md), each half of it alone, scales per
group of 128 and of 32 along k for both operands (32: llama.cpp's Q8_0 weights and its q8_0 activations),
and the engine's scheme with the down projection left unrounded or alone rounded. Symmetric, round to
nearest even, [-127, 127], as the engine. This simulates the rounding only: the engine also keeps the rest
of the layer in bf16, which `npm run bench:quantization` measures whole.
"""
import math
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/test/reference")
from ref_model import RefModel, rms_norm, rotate_half  # noqa: E402

LABELS = [330, 365, 334, 384, 413, 401, 420, 382]  # ▁A ... ▁H in the Mistral vocabulary (bench/engine.ts)


def rounded(t, group):
    """t with its last dimension rounded to int8 steps: one scale per row (group 0) or per group of k."""
    g = t.reshape(*t.shape[:-1], -1, group) if group else t.unsqueeze(-2)
    s = g.abs().amax(-1, keepdim=True) / 127
    return (torch.round(g / torch.where(s == 0, torch.ones_like(s), s)).clamp(-127, 127) * s).reshape(t.shape)


def scheme(weights, activations, layers=("qkv", "o", "gate_up", "down")):
    """A linear layer's product with the weights' and the activations' rounding (False: none; 0: per row)."""
    kept = {}

    def linear(x, w, name):
        if name not in layers:
            return x @ w.t()
        if weights is not False:
            w = kept.setdefault(id(w), rounded(w, weights))
        if activations is not False:
            x = rounded(x, activations)
        return x @ w.t()

    return linear


def label_logits(model, tokens, linear):
    T = len(tokens)
    pos = torch.arange(T)
    angles = pos.double().unsqueeze(1) * model.inv_freq.double().unsqueeze(0)
    angles = torch.cat([angles, angles], -1)
    cos, sin = angles.cos().float().unsqueeze(1), angles.sin().float().unsqueeze(1)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    x = model.embed[torch.tensor(tokens)]
    for L in model.layers:
        h = rms_norm(x, L.input_norm, L.eps)
        q = linear(h, L.wq, "qkv").view(T, L.nh, L.hd)
        k = linear(h, L.wk, "qkv").view(T, L.nkv, L.hd)
        v = linear(h, L.wv, "qkv").view(T, L.nkv, L.hd)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = L.nh // L.nkv
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        scores = torch.einsum("qhd,khd->hqk", q, k).div(math.sqrt(L.hd)).masked_fill(~mask.unsqueeze(0), float("-inf"))
        x = x + linear(torch.einsum("hqk,khd->qhd", torch.softmax(scores, -1), v).reshape(T, -1), L.wo, "o")
        h = rms_norm(x, L.post_norm, L.eps)
        x = x + linear(torch.nn.functional.silu(linear(h, L.w_gate, "gate_up")) * linear(h, L.w_up, "gate_up"), L.w_down, "down")
    return (rms_norm(x[-1:], model.norm, model.eps) @ model.lm_head[LABELS].t())[0]


def main():
    torch.set_num_threads(2)
    model = RefModel(sys.argv[1]).float()
    rnd = torch.Generator().manual_seed(7)
    vocab = model.embed.shape[0]
    prompts = [torch.randint(100, vocab, (120 + 15 * i,), generator=rnd).tolist() for i in range(8)]
    schemes = {
        "weights per channel, activations per row (the engine's int8)": scheme(0, 0),
        "weights per channel only": scheme(0, False),
        "activations per row only": scheme(False, 0),
        "both per group of 128": scheme(128, 128),
        "both per group of 32 (llama.cpp Q8_0 and its q8_0 activations)": scheme(32, 32),
        "the engine's int8, down projection unrounded": scheme(0, 0, ("qkv", "o", "gate_up")),
        "the engine's int8 on the down projection alone": scheme(0, 0, ("down",)),
    }
    with torch.no_grad():
        exact = [label_logits(model, p, lambda x, w, _: x @ w.t()) for p in prompts]
        print(f"{len(prompts)} prompts; largest label probability of each, unrounded: " +
              ", ".join(f"{torch.softmax(e, 0).max().item():.2f}" for e in exact))
        print("\n| rounding | max / mean |Δ label logit| | max / mean |Δp| |\n|---|---|---|")
        for name, linear in schemes.items():
            dl, dp = [], []
            for p, e in zip(prompts, exact):
                y = label_logits(model, p, linear)
                dl.append((y - e).abs().max().item())
                dp.append((torch.softmax(y, 0) - torch.softmax(e, 0)).abs().max().item())
            print(f"| {name} | {max(dl):.1e} / {sum(dl) / len(dl):.1e} | {max(dp):.1e} / {sum(dp) / len(dp):.1e} |", flush=True)


if __name__ == "__main__":
    main()
