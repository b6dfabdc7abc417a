"""For GEMM shapes (in, out) of several model sizes: the row counts M at which a row's bits differ from M=4096's
(torch.nn.functional.linear on this GPU's cuBLAS), in bf16 as torch leaves it, in bf16 and fp16 with split-K off as
the batch-invariant engine sets it (aten_layer_kernels.cpp), and in fp32. A split-K kernel chosen for few rows shows
as the small M.

    python3 bench/gpu/split_k_rows.py
"""
import torch

from row_invariance import no_split_k

ROWS = [1, 8, 24, 64, 128, 192, 256, 384, 512, 1024, 2048]


def differing(dtype, k, n):
    x = torch.randn(4096, k, device="cuda").to(dtype)
    w = (torch.randn(n, k, device="cuda") * k ** -0.5).to(dtype)
    ref = torch.nn.functional.linear(x, w)[:1]
    return [m for m in ROWS if not torch.equal(torch.nn.functional.linear(x[:m], w)[:1], ref)]


torch.manual_seed(0)
for k in (896, 1024, 2048, 3072, 4096, 4864, 8192, 14336):
    for n in (1024, 2048, 4096, 8192):
        default, fp32 = differing(torch.bfloat16, k, n), differing(torch.float32, k, n)
        with no_split_k():
            whole, whole_fp16 = differing(torch.bfloat16, k, n), differing(torch.float16, k, n)
        print(f"{k} {n} bf16 {default} bf16-no-split-k {whole} fp16-no-split-k {whole_fp16} fp32 {fp32}", flush=True)
