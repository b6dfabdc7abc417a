"""The cross-check against transformers' own implementations (issue 29; docs/gpu.md), run by
bench/gpu/run.sh where transformers is installed (the GPU machine; the CPU half needs no GPU).

For every tiny model written by make_models.py (every family, old and new, built with
transformers' own config and model classes and random weights), transformers' fp32 logits at the
readout positions (eager attention: the one that applies every option, soft-capping included) are
compared with the engine's label logits from tq_cli in fp32, on the CPU and on the GPU, for a state
with three questions (two sharing their first tokens), and for longrope's family one sequence within
its original context and one past it. Bound: max |Δ logit| <= 1e-4. Writes families.json and
families.md into --out.

  python3 bench/gpu/families.py --cli build-gpu/tq_cli --models build-gpu/models --out OUT [--devices cpu,cuda]
"""
import argparse
import json
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check import cli, ids, logits_of, max_diff  # noqa: E402

FAMILIES = ["tiny-llama", "tiny-mistral", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3", "tiny-phi3", "tiny-olmo2", "tiny-smollm3"]
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


def check(args, name):
    folder = os.path.join(args.models, name)
    if not os.path.exists(os.path.join(folder, "config.json")):
        return {"error": "not written (this transformers has no class for it)"}
    vocab = json.load(open(os.path.join(folder, "config.json")))["vocab_size"]
    requests = requests_for(folder, vocab)
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
    args = parser.parse_args()
    import transformers as tf

    results = {"transformers": tf.__version__, "torch": torch.__version__, "bound": BOUND, "families": {}}
    for name in FAMILIES:
        try:
            results["families"][name] = check(args, name)
        except Exception as e:  # one family failing must not hide the others' figures
            results["families"][name] = {"error": repr(e)}
        print(name, json.dumps(results["families"][name]), flush=True)
    with open(os.path.join(args.out, "families.json"), "w") as f:
        json.dump(results, f, indent=2)
    devices = args.devices.split(",")
    lines = [f"# Engine against transformers {tf.__version__} (fp32 label logits, max |Δ|, bound {BOUND:g})", "",
             "| model | " + " | ".join(devices) + " | passed |", "|---|" + "---|" * (len(devices) + 1)]
    for name, r in results["families"].items():
        if "error" in r:
            lines.append(f"| {name} | error: {r['error']} |")
        else:
            lines.append(f"| {name} | " + " | ".join(f"{r[d]:.1e}" for d in devices) + f" | {'yes' if r['passed'] else 'NO'} |")
    with open(os.path.join(args.out, "families.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
