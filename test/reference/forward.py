"""Float64 reference logits. Reads JSON from stdin:
  {"model": <checkpoint folder>, "sequences": [[token ids], ...], "out": <file>}
and writes, for each sequence in order, its full-vocabulary logits at every
position as raw little-endian float64 [T, V] to `out`. Prints {"vocab": V}.
Run with Debian's interpreter: /usr/bin/python3 forward.py
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_model import RefModel  # noqa: E402


def main():
    req = json.load(sys.stdin)
    torch.set_num_threads(2)
    model = RefModel(req["model"])
    with torch.no_grad(), open(req["out"], "wb") as out:
        for seq in req["sequences"]:
            ids = torch.tensor(seq, dtype=torch.long)
            pos = torch.arange(len(seq), dtype=torch.long)
            causal = torch.ones(len(seq), len(seq), dtype=torch.bool).tril()
            hidden = model(ids, pos, causal)
            logits = hidden @ model.lm_head_weight().t()
            out.write(logits.contiguous().numpy().astype("<f8").tobytes())
    print(json.dumps({"vocab": int(model.lm_head.shape[0])}))


if __name__ == "__main__":
    main()
