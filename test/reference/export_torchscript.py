"""Exports a checkpoint folder as a TorchScript module following the engine's
contract (see ref_model.py). Usage: /usr/bin/python3 export_torchscript.py <folder> <out.pt>"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_model import RefModel  # noqa: E402

model = RefModel(sys.argv[1]).float().eval()
torch.jit.script(model).save(sys.argv[2])
print(sys.argv[2])
