"""The cross-check against transformers' own implementations (issue 29; docs/gpu.md), run by
bench/gpu/run.sh where transformers is installed (the GPU machine; the CPU half needs no GPU).

For every tiny model written by make_models.py (every family, old and new, built with
transformers' own config and model classes and random weights), transformers' fp32 logits at the
readout positions (eager attention: the one that applies every option, soft-capping included) are
compared with the engine's label logits from tq_cli in fp32, on the CPU and on the GPU, for a state
with three questions (two sharing their first tokens), and for longrope's family one sequence within
its original context and one past it. The vision-language families (Qwen2-VL, Qwen2.5-VL) answer
a state with an image of 84 x 56 pixels (3 x 2 merged units: a whole window of Qwen2.5-VL's and a
partial one), patchified by transformers' own Qwen2VLImageProcessor for transformers and given to
tq_cli as the raw RGB. Bound: max |Δ logit| <= 1e-4. Writes families.json and families.md into --out.

  python3 bench/gpu/families.py --cli build/tq_cli --models build/models --out OUT [--devices cpu,cuda] [--only A,B]
"""
import argparse
import inspect
import json
import os
import random
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check import cli, ids, logits_of, max_diff, per_model, write_results  # noqa: E402
from tiny import TINY, VISION  # noqa: E402

FAMILIES = TINY + VISION
BOUND = 1e-4


def requests_for(folder, vocab):
    rng = random.Random(os.path.basename(folder))
    state = ids(rng, 60, vocab)  # several blocks, past tiny-mistral's window of 24 and tiny-gemma3's of 16
    qs = [ids(rng, 8, vocab), ids(rng, 9, vocab)]
    qs.append(qs[0][:3] + ids(rng, 5, vocab))  # shares its first tokens with the first question
    labels = ids(rng, 32, vocab)
    out = [{"state": state, "questions": [{"tokens": q, "labelIds": labels} for q in qs]}]
    original = json.load(open(os.path.join(folder, "config.json"))).get("original_max_position_embeddings")
    if original:  # longrope: a sequence within the original context (short factors) beside the long ones
        out.append({"state": state[: original - 12], "questions": [{"tokens": qs[0], "labelIds": labels}]})
    return out


def transformers_logits(folder, requests):
    import transformers as tf

    model = tf.AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32, attn_implementation="eager").eval()
    out = []
    with torch.no_grad():
        for r in requests:
            for q in r["questions"]:
                seq = torch.tensor([r["state"] + q["tokens"]])
                logits = model(input_ids=seq).logits[0, -1]
                out.append(logits[q["labelIds"]].tolist())
    return out


def image_case(args, folder, config):
    """A state with one image and a question: the tq_cli request, and transformers' label logits."""
    import numpy as np
    import transformers as tf

    start, pad, end = config["vision_start_token_id"], config["image_token_id"], config["vision_end_token_id"]
    rng = random.Random(os.path.basename(folder))
    rgb = np.random.default_rng(7).integers(0, 256, (56, 84, 3), dtype=np.uint8)
    rgb_file = os.path.join(args.scratch, os.path.basename(folder) + ".rgb")  # not --out: the window packs that folder whole
    rgb.tofile(rgb_file)
    text = [rng.randrange(1000, 150000) for _ in range(9)]
    state, question = text[:3] + [start, pad, end] + text[3:6], text[6:]
    labels = [rng.randrange(1000, 150000) for _ in range(16)]
    pixels = tf.Qwen2VLImageProcessor()(images=[rgb], do_resize=False, return_tensors="pt")
    grid = pixels["image_grid_thw"]
    image_tokens = int(grid.prod()) // 4  # one token per 2 x 2 patches
    expanded = state[:4] + [pad] * image_tokens + state[5:] + question
    model_class = getattr(tf, config["architectures"][0])
    model = model_class.from_pretrained(folder, torch_dtype=torch.float32, attn_implementation="eager").eval()
    ids = torch.tensor([expanded])
    inputs = dict(input_ids=ids, pixel_values=pixels["pixel_values"].float(), image_grid_thw=grid)
    # transformers 5.6 on builds M-RoPE's positions only from mm_token_type_ids (1 at image tokens): without it
    # Qwen2-VL fails and Qwen2.5-VL falls back to 1-D positions. Older versions take no such argument.
    if "mm_token_type_ids" in inspect.signature(model.forward).parameters:
        inputs["mm_token_type_ids"] = (ids == pad).long()
    with torch.no_grad():
        logits = model(**inputs).logits[0, -1]
    request = {"state": state, "images": [{"rgb": rgb_file, "width": 84, "height": 56}], "questions": [{"tokens": question, "labelIds": labels}]}
    return [request], [logits[labels].tolist()]


def check(args, name):
    folder = os.path.join(args.models, name)
    if not os.path.exists(os.path.join(folder, "config.json")):
        return {"error": "not written (this transformers has no class for it)"}
    config = json.load(open(os.path.join(folder, "config.json")))
    if "vision_config" in config:
        requests, expected = image_case(args, folder, config)
    else:
        requests = requests_for(folder, config["vocab_size"])
        expected = transformers_logits(folder, requests)
    result = {}
    for device in args.devices.split(","):
        got = logits_of(cli(args, [requests], ["--model", folder, "--device", device, "--dtype", "fp32"]))
        result[device] = max(max_diff(g, e) for g, e in zip(got, expected))
    result["passed"] = all(v <= BOUND for k, v in result.items() if k != "passed")
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--devices", default="cpu,cuda")
    parser.add_argument("--only", help="these families (comma-separated; default: all)")
    args = parser.parse_args()
    import transformers as tf

    results = {"transformers": tf.__version__, "torch": torch.__version__, "bound": BOUND, "families": {}}
    save = lambda: write_results(args.out, "families", results, markdown(args, results))  # noqa: E731
    with tempfile.TemporaryDirectory() as args.scratch:  # the images' raw RGB for tq_cli
        per_model(args.only.split(",") if args.only else FAMILIES, lambda name: check(args, name), save, results["families"])
    print(markdown(args, results))


def markdown(args, results):
    import transformers as tf

    devices = args.devices.split(",")
    lines = [f"# Engine against transformers {tf.__version__} (fp32 label logits, max |Δ|, bound {BOUND:g})", "",
             "| model | " + " | ".join(devices) + " | passed |", "|---|" + "---|" * (len(devices) + 1)]
    for name, r in results["families"].items():
        if "error" in r:
            lines.append(f"| {name} | error: {r['error']} |")
        else:
            lines.append(f"| {name} | " + " | ".join(f"{r[d]:.1e}" for d in devices) + f" | {'yes' if r['passed'] else 'NO'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
