"""The float64 reference on one checkpoint under both layouts of its config.json: as written (transformers 4's
rope_theta, rope_scaling, rope_local_base_freq at the top: the test models) and in transformers 5's layout as
bench/gpu/make_models.py writes it (its own v5_fields: rope_parameters, one per layer type for Gemma 3). The same
weights, so the same RoPE read both ways must give the same logits. Prints {model: {"max_abs_diff", "rope_parameters"}}.

    python3 config_forms.py MODEL_DIR [MODEL_DIR ...]
"""
import json
import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench", "gpu"))
from make_models import v5_fields  # noqa: E402
from ref_families import family_model  # noqa: E402
from ref_model import RefModel  # noqa: E402


def logits(folder, tokens):
    """The reference's logits at every position (the family's own forward, or the Llama-shaped one)."""
    config = json.load(open(os.path.join(folder, "config.json")))
    seq = torch.tensor(tokens)
    with torch.no_grad():
        ref = family_model(folder, config["model_type"])
        if ref is not None:
            return ref.logits(ref.hidden(seq))
        ref = RefModel(folder)
        hidden = ref(seq, torch.arange(len(seq)), torch.ones(len(seq), len(seq), dtype=torch.bool).tril())
        return hidden @ ref.lm_head_weight().t()


def main():
    out = {}
    for folder in sys.argv[1:]:
        config = json.load(open(os.path.join(folder, "config.json")))
        # Past phi3's original context of 64 (its long factors) and gemma3's window of 16.
        tokens = [(17 * i + 3) % 1000 + 10 for i in range(80)]
        with tempfile.TemporaryDirectory() as v5:
            for f in os.listdir(folder):
                if f != "config.json":
                    os.symlink(os.path.join(os.path.abspath(folder), f), os.path.join(v5, f))
            v5_config = v5_fields(config)
            json.dump(v5_config, open(os.path.join(v5, "config.json"), "w"))
            diff = (logits(folder, tokens) - logits(v5, tokens)).abs().max().item()
        out[os.path.basename(folder)] = {"max_abs_diff": diff, "rope_parameters": v5_config["rope_parameters"]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
