#!/usr/bin/env bash
# The GPU check (issue 11; docs/gpu.md): on a machine with an NVIDIA GPU, a CUDA build of
# PyTorch (its C++ headers and TorchConfig.cmake), transformers, CMake, ninja and nvcc, without Node:
#   bash bench/gpu/run.sh OUT_DIR
# builds the engine library and tq_cli against that torch, writes the test and bench models, and
# runs bench/gpu/selfcheck.py first (issue 43: the fused forward against the ATen one, layer by layer: where
# they first disagree), then bench/gpu/check.py: parity, invariance and the benchmark against transformers
# (both forward paths), then
# bench/gpu/families.py: every family's logits against transformers' own classes, then bench/gpu/fp8.py:
# fp8 weights' fidelity, invariance and speed against bf16 (issue 31). Results go to
# OUT_DIR/selfcheck.{json,md}, OUT_DIR/results.{json,md}, OUT_DIR/families.{json,md} and OUT_DIR/fp8.{json,md}; the
# build log to OUT_DIR/build.log. Last, where the server bundle was carried along (bench/gpu/bundle/, made by
# bench/gpu/bundle.sh), bench/gpu/serve.sh: the server over HTTP (OUT_DIR/serve.{json,md}).
# nlohmann/json: installed (nlohmann-json3-dev), or TQ_JSON_INCLUDE=<folder holding nlohmann/json.hpp>.
# TQ_GPU_CHECKS picks the parts (default "selfcheck check families fp8 serve"), e.g. to split the run across commands of
# at most 10 minutes; the build is incremental when the build folder is still there.
set -euo pipefail
out=${1:?usage: bench/gpu/run.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
py=${PYTHON:-python3}
build=${TQ_GPU_BUILD:-build-gpu}

torch_dir=$("$py" -c 'import os, torch; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))')
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/gpu.csv" 2>&1 || true
flags=(-DTorch_DIR="$torch_dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$(command -v nvcc)")
[ -n "${TQ_JSON_INCLUDE:-}" ] && flags+=(-DTQ_JSON_INCLUDE="$TQ_JSON_INCLUDE")
start=$(date +%s)
if ! { cmake -S . -B "$build" -G Ninja "${flags[@]}" && cmake --build "$build" --target tq_cli -j "$(nproc)"; } > "$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "build failed (log: $out/build.log)"
  exit 1
fi
echo "built in $(( $(date +%s) - start )) s"

checks=" ${TQ_GPU_CHECKS:-selfcheck check families fp8 serve} "
wanted() { [[ "$checks" == *" $1 "* ]]; }
"$py" bench/gpu/make_models.py "$build/models"
# The fused forward against the ATen one, layer by layer (issue 43): first, so a disagreement shows before the rest.
if wanted selfcheck; then "$py" bench/gpu/selfcheck.py --cli "$build/tq_cli" --models "$build/models" --out "$out" --device "${TQ_DEVICE:-cuda}" || echo "selfcheck failed"; fi
if wanted check; then "$py" bench/gpu/check.py --cli "$build/tq_cli" --models "$build/models" --out "$out" "${@:2}"; fi
# Every family against transformers' own classes, on the CPU and the GPU (issue 29).
if wanted families; then "$py" bench/gpu/families.py --cli "$build/tq_cli" --models "$build/models" --out "$out" || echo "families check failed"; fi
# fp8 weights against bf16 in the same run (issue 31).
if wanted fp8; then "$py" bench/gpu/fp8.py --cli "$build/tq_cli" --models "$build/models" --out "$out" || echo "fp8 check failed"; fi
# The server on the GPU (issue 26), where the bundle came along.
if wanted serve; then
  if [ -d bench/gpu/bundle ]; then bash bench/gpu/serve.sh "$out" || echo "serve failed"; else echo "serve: no bench/gpu/bundle (bash bench/gpu/bundle.sh here, then carry it)"; fi
fi
