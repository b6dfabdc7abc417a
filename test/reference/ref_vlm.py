"""Float64 reference for Qwen2-VL (Qwen2VLForConditionalGeneration) and
Qwen2.5-VL (Qwen2_5_VLForConditionalGeneration), written from transformers'
modeling_qwen2_vl.py, modeling_qwen2_5_vl.py and Qwen2VLImageProcessor without
importing them. Reads JSON from stdin:
  {"model": <checkpoint folder>, "out": <file>,
   "cases": [{"tokens": [ids, one <|image_pad|> per image],
              "images": [{"rgb": <file of raw RGB bytes>, "width": W, "height": H}]}]}
and writes, per case, the full-vocabulary logits at every position of the
expanded prompt as raw little-endian float64 [T, V] to `out`. Prints
{"vocab": V, "lengths": [T, ...]}. Run with Debian's interpreter.

Where the engine differs on purpose, this follows transformers: the patch
embedding is a Conv3d, the patch order comes from the image processor's
reshape/transpose, images are found by get_rope_index's scan of
<|vision_start|> tokens, and M-RoPE splits cos/sin by mrope_section * 2.
Qwen2.5-VL's windows come from get_window_index's padded reshape (pad with
-100, drop the pads) and attend by cu_window_seqlens, as there.
"""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_model import Layer, read_checkpoint, rms_norm  # noqa: E402

MEAN = np.array([0.48145466, 0.4578275, 0.40821073])
STD = np.array([0.26862954, 0.26130258, 0.27577711])


def canonical(name):
    for old, new in (("model.language_model.", "model."), ("model.visual.", "visual.")):
        if name.startswith(old):
            return new + name[len(old):]
    return name


def pixel_patches(rgb, v):
    """Qwen2VLImageProcessor._preprocess after resizing: rescale, normalize, patchify."""
    ps, m, tps = v["patch_size"], v["spatial_merge_size"], v["temporal_patch_size"]
    img = (rgb.astype(np.float64) / 255.0 - MEAN) / STD  # [H, W, C]
    patches = img.transpose(2, 0, 1)[None]  # [1, C, H, W]
    patches = np.tile(patches, (tps, 1, 1, 1))  # a still image: the frame repeated
    c, gh, gw = patches.shape[1], patches.shape[2] // ps, patches.shape[3] // ps
    patches = patches.reshape(1, tps, c, gh // m, m, ps, gw // m, m, ps)
    patches = patches.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return torch.from_numpy(patches.reshape(gh * gw, c * tps * ps * ps).copy()), (1, gh, gw)


def layer_norm(x, w, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, 1e-6)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)


def rms(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def window_index(grids, v):
    """Qwen2_5_VisionTransformer.get_window_index: the merged units in window order, and each unit's window."""
    m = v["spatial_merge_size"]
    side = v["window_size"] // m // v["patch_size"]
    order, windows, offset, n_windows = [], [], 0, 0
    for t, h, ww in grids:
        gh, gw = h // m, ww // m
        index = torch.arange(t * gh * gw).reshape(t, gh, gw)
        pad_h, pad_w = side - gh % side, side - gw % side
        nh, nw = (gh + pad_h) // side, (gw + pad_w) // side
        padded = torch.nn.functional.pad(index, (0, pad_w, 0, pad_h), "constant", -100)
        padded = padded.reshape(t, nh, side, nw, side).permute(0, 1, 3, 2, 4).reshape(t, nh * nw, side * side)
        for k in range(t * nh * nw):
            units = padded[k // (nh * nw), k % (nh * nw)]
            units = units[units != -100]
            order.append(units + offset)
            windows += [n_windows] * len(units)
            n_windows += 1
        offset += t * gh * gw
    return torch.cat(order), torch.tensor(windows)


def vision_tower(w, v, pixel_values, grids):
    qwen25 = "out_hidden_size" in v
    E, heads = (v["hidden_size"] if qwen25 else v["embed_dim"]), v["num_heads"]
    hd, m = E // heads, v["spatial_merge_size"]
    conv = w["visual.patch_embed.proj.weight"]
    x = torch.nn.functional.conv3d(pixel_values.view(-1, 3, v["temporal_patch_size"], v["patch_size"], v["patch_size"]), conv,
                                   stride=conv.shape[2:]).view(-1, E)
    # rot_pos_emb
    pos = []
    for t, h, ww in grids:
        hpos = torch.arange(h).unsqueeze(1).expand(-1, ww).reshape(h // m, m, ww // m, m).permute(0, 2, 1, 3).flatten()
        wpos = torch.arange(ww).unsqueeze(0).expand(h, -1).reshape(h // m, m, ww // m, m).permute(0, 2, 1, 3).flatten()
        pos.append(torch.stack([hpos, wpos], -1).repeat(t, 1))
    pos = torch.cat(pos)
    dim = hd // 2
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    table = torch.outer(torch.arange(max(max(h, ww) for _, h, ww in grids), dtype=torch.float64), inv_freq)
    freqs = table[pos].flatten(1)
    # cu_seqlens: attention within each image only
    lens = [t * h * ww for t, h, ww in grids]
    image_of = torch.repeat_interleave(torch.arange(len(lens)), torch.tensor(lens))
    n, unit = x.shape[0], m * m
    if qwen25:
        # The units in window order (their patches with them), and a mask of same-window pairs.
        units, window_of = window_index(grids, v)
        x = x.reshape(n // unit, unit, E)[units].reshape(n, E)
        freqs = freqs.reshape(n // unit, unit, -1)[units].reshape(n, -1)
        image_of = image_of.reshape(n // unit, unit)[units].reshape(n)
        window_of = window_of.repeat_interleave(unit)
        window_mask = window_of.unsqueeze(0) == window_of.unsqueeze(1)
    cos = freqs.cos().unsqueeze(1).repeat(1, 1, 2)
    sin = freqs.sin().unsqueeze(1).repeat(1, 1, 2)
    mask = image_of.unsqueeze(0) == image_of.unsqueeze(1)
    norm = (lambda x, p: rms(x, w[p + ".weight"])) if qwen25 else (lambda x, p: layer_norm(x, w[p + ".weight"], w[p + ".bias"]))
    for i in range(v["depth"]):
        p = f"visual.blocks.{i}."
        h = norm(x, p + "norm1")
        q, k, val = (h @ w[p + "attn.qkv.weight"].t() + w[p + "attn.qkv.bias"]).reshape(n, 3, heads, hd).permute(1, 0, 2, 3).unbind(0)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd)
        windowed = qwen25 and i not in v.get("fullatt_block_indexes", [])
        scores = scores.masked_fill(~(window_mask if windowed else mask).unsqueeze(0), float("-inf"))
        attn = torch.einsum("hqk,khd->qhd", torch.softmax(scores, -1), val).reshape(n, E)
        x = x + attn @ w[p + "attn.proj.weight"].t() + w[p + "attn.proj.bias"]
        h = norm(x, p + "norm2")
        if qwen25:
            lin = lambda name, y: y @ w[p + f"mlp.{name}.weight"].t() + w[p + f"mlp.{name}.bias"]  # noqa: E731
            x = x + lin("down_proj", torch.nn.functional.silu(lin("gate_proj", h)) * lin("up_proj", h))
        else:
            h = h @ w[p + "mlp.fc1.weight"].t() + w[p + "mlp.fc1.bias"]
            h = h * torch.sigmoid(1.702 * h)
            x = x + h @ w[p + "mlp.fc2.weight"].t() + w[p + "mlp.fc2.bias"]
    x = norm(x, "visual.merger.ln_q").view(-1, E * unit)
    x = torch.nn.functional.gelu(x @ w["visual.merger.mlp.0.weight"].t() + w["visual.merger.mlp.0.bias"])
    x = x @ w["visual.merger.mlp.2.weight"].t() + w["visual.merger.mlp.2.bias"]
    return x[torch.argsort(units)] if qwen25 else x


def get_rope_index(ids, grids, config, m):
    """Qwen2VLModel.get_rope_index for one sequence of images (no video)."""
    image_token, start_token = config["image_token_id"], config["vision_start_token_id"]
    tokens = ids.tolist()
    starts = [i for i, t in enumerate(tokens) if t == start_token]
    n_images = sum(1 for i in starts if i + 1 < len(tokens) and tokens[i + 1] == image_token)
    parts, st, k = [], 0, 0
    for _ in range(n_images):
        ed = tokens.index(image_token, st)
        t, h, w = grids[k]
        k += 1
        gt, gh, gw = t, h // m, w // m
        text_len = ed - st
        st_idx = parts[-1].max() + 1 if parts else 0
        parts.append(torch.arange(text_len).view(1, -1).expand(3, -1) + st_idx)
        t_index = torch.arange(gt).view(-1, 1).expand(-1, gh * gw).flatten()
        h_index = torch.arange(gh).view(1, -1, 1).expand(gt, -1, gw).flatten()
        w_index = torch.arange(gw).view(1, 1, -1).expand(gt, gh, -1).flatten()
        parts.append(torch.stack([t_index, h_index, w_index]) + text_len + st_idx)
        st = ed + gt * gh * gw
    if st < len(tokens):
        st_idx = parts[-1].max() + 1 if parts else 0
        parts.append(torch.arange(len(tokens) - st).view(1, -1).expand(3, -1) + st_idx)
    return torch.cat(parts, 1)  # [3, T]


def run(req):
    config, raw = read_checkpoint(req["model"])
    w = {canonical(k): t for k, t in raw.items()}
    text = config.get("text_config") or config
    v = config["vision_config"]
    rope = text.get("rope_parameters") or text.get("rope_scaling") or config.get("rope_scaling")
    section = rope["mrope_section"]
    theta = rope.get("rope_theta", text.get("rope_theta", config.get("rope_theta")))
    hd = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
    layers = [Layer(w, f"model.layers.{i}.", text, hd) for i in range(text["num_hidden_layers"])]
    embed, lm_head = w["model.embed_tokens.weight"], w.get("lm_head.weight", w["model.embed_tokens.weight"])
    m = v["spatial_merge_size"]
    lengths = []
    with torch.no_grad(), open(req["out"], "wb") as out:
        for case in req["cases"]:
            pixels, grids = [], []
            for im in case["images"]:
                rgb = np.fromfile(im["rgb"], dtype=np.uint8).reshape(im["height"], im["width"], 3)
                pv, grid = pixel_patches(rgb, v)
                pixels.append(pv)
                grids.append(grid)
            # The processor's expansion: each <|image_pad|> becomes t*h*w / m^2 of them.
            ids, k = [], 0
            for t in case["tokens"]:
                if t == config["image_token_id"]:
                    gt, gh, gw = grids[k]
                    ids += [t] * (gt * gh * gw // (m * m))
                    k += 1
                else:
                    ids.append(t)
            ids = torch.tensor(ids)
            x = embed[ids].clone()
            if pixels:
                image_embeds = vision_tower(w, v, torch.cat(pixels), grids)
                x[ids == config["image_token_id"]] = image_embeds
            positions = get_rope_index(ids, grids, config, m).to(torch.float64)  # [3, T]
            inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
            freqs = positions.unsqueeze(-1) * inv  # [3, T, hd/2]
            emb = torch.cat([freqs, freqs], -1)
            pick = lambda table: torch.cat([chunk[i % 3] for i, chunk in enumerate(table.split(section * 2, dim=-1))], -1).unsqueeze(1)
            cos, sin = pick(emb.cos()), pick(emb.sin())
            T = ids.shape[0]
            causal = torch.ones(T, T, dtype=torch.bool).tril()
            for layer in layers:
                x = layer(x, cos, sin, causal)
            logits = rms_norm(x, w["model.norm.weight"], float(text["rms_norm_eps"])) @ lm_head.t()
            out.write(logits.contiguous().numpy().astype("<f8").tobytes())
            lengths.append(T)
    return {"vocab": int(lm_head.shape[0]), "lengths": lengths}


if __name__ == "__main__":
    torch.set_num_threads(2)
    print(json.dumps(run(json.load(sys.stdin))))
