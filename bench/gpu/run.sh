#!/usr/bin/env bash
# The GPU window in one command (issues 11, 53; docs/gpu.md, "The window"): on the lent GPU machine (a CUDA
# PyTorch with its C++ headers, transformers, CMake, ninja, nvcc; no Node, no network)
#   bash bench/gpu/run.sh OUT_DIR
# runs, within 520 s, preflight, build, models, profile, benchmark, invariance, self-check, server, then what time allows, each guarded and
# time-limited, packing everything so far into OUT_DIR/gpu.tgz after each step (OUT_DIR/summary.md beside it).
# Without a GPU it runs the same steps on the CPU with the test models (what CI checks):
#   bash bench/gpu/run.sh OUT_DIR --device cpu
# A second command on the same machine, while it is still warm, goes on where the first stopped:
#   bash bench/gpu/run.sh OUT_DIR --resume --budget 140
# Its flags (--budget, --steps, --resume, --models, --build, --work, --families): bench/gpu/window.py --help.
# The server step needs Node: bash bench/gpu/bundle.sh here, then carry bench/gpu/bundle along.
set -euo pipefail
exec "${PYTHON:-python3}" "$(dirname "$0")/window.py" "$@"
