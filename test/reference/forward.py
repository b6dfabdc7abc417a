"""Float64 reference logits. Reads JSON from stdin:
  {"model": <checkpoint folder>, "sequences": [[token ids], ...], "out": <file>,
   "all_positions": N (optional: only the first N sequences at every position)}
and writes, for each sequence in order, its full-vocabulary logits at every
position as raw little-endian float64 [T, V] to `out` (past the first N, at
its last position only, [1, V]: a 262,144-token vocabulary makes every row
2 MiB). Prints {"vocab": V}.
Run with Debian's interpreter: /usr/bin/python3 forward.py
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_families import family_model  # noqa: E402
from ref_model import RefModel  # noqa: E402


def run(req):
    with open(os.path.join(req["model"], "config.json")) as f:
        family = family_model(req["model"], json.load(f).get("model_type"))
    model = family if family is not None else RefModel(req["model"])
    with torch.no_grad(), open(req["out"], "wb") as out:
        for i, seq in enumerate(req["sequences"]):
            ids = torch.tensor(seq, dtype=torch.long)
            if family is not None:
                hidden = model.hidden(ids)
            else:
                pos = torch.arange(len(seq), dtype=torch.long)
                causal = torch.ones(len(seq), len(seq), dtype=torch.bool).tril()
                hidden = model(ids, pos, causal)
            if i >= req.get("all_positions", len(req["sequences"])):
                hidden = hidden[-1:]
            logits = model.logits(hidden) if family is not None else hidden @ model.lm_head_weight().t()
            out.write(logits.contiguous().numpy().astype("<f8").tobytes())
    return {"vocab": int(model.lm_head.shape[0])}


if __name__ == "__main__":
    torch.set_num_threads(2)
    print(json.dumps(run(json.load(sys.stdin))))
