"""For GEMM shapes (in, out) of several model sizes: the row counts M at which a row's bits differ from M=4096's
(bf16 torch.nn.functional.linear, this GPU's cuBLAS). A split-K kernel chosen for few rows shows as the small M."""
import json
import torch

ROWS = [1, 8, 24, 64, 128, 192, 256, 384, 512, 1024, 2048]
torch.manual_seed(0)
out = {}
for k in (896, 1024, 2048, 3072, 4096, 4864, 8192, 14336):
    for n in (1024, 2048, 4096, 8192):
        x = torch.randn(4096, k, device="cuda", dtype=torch.bfloat16)
        w = (torch.randn(n, k, device="cuda") * k ** -0.5).to(torch.bfloat16)
        ref = torch.nn.functional.linear(x, w)[:1]
        bad = [m for m in ROWS if not torch.equal(torch.nn.functional.linear(x[:m], w)[:1], ref)]
        out[f"{k}x{n}"] = bad
        print(k, n, bad, flush=True)
