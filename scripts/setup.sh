#!/usr/bin/env bash
# One-command set-up on a fresh Debian bookworm machine: system packages, then
# `npm ci`, which also builds the engine addon (cmake-js, offline).
set -euo pipefail
cd "$(dirname "$0")/.."

# libtorch (CPU) and its fast BLAS; python3-torch is the float64 reference the
# tests compare against; nlohmann-json parses config.json and safetensors headers. chromium runs
# the playground's browser test (playwright-core drives it), nginx the several-replica recipe's,
# and curl the playground's "copy as curl" command.
packages=(libtorch-dev libdnnl-dev libopenblas0-pthread python3-torch python3-numpy nlohmann-json3-dev cmake g++ make python3 chromium nginx curl)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The headers a CUDA build's C++ is checked against (a PyTorch 2.x wheel's), unpacked, and ATen's precompiled once
# (scripts/torch2-pch.js); then that C++ compiled against them (scripts/cuda-build-check.js), which
# test/kernels/cuda.test.ts reads while its sources are unchanged. Neither needs an npm package: they run beside npm's
# install, which leaves a core idle at times. A compile error is not the set-up's failure: the test compiles again and
# shows it.
(node scripts/torch2-pch.js && { node scripts/cuda-build-check.js || echo "cuda-build-check failed: npm test shows the error (test/kernels/cuda.test.ts)"; }) &
torch2_pch=$!

# --omit=optional: node-llama-cpp (the benchmark peer) lists every platform's prebuilt binary as
# optional, CUDA and Vulkan builds included; the CPU one is a direct devDependency. sharp does the
# same: its linux-x64 binaries (@img/sharp-linux-x64, @img/sharp-libvips-linux-x64) are direct dependencies.
# node-llama-cpp's postinstall (it loads that CPU binary once, to see that it runs here) is approved in package.json's
# allowScripts: npm 11 lists a dependency's unreviewed install script after every install, and npm 12 skips it.
npm ci --omit=optional --no-audit --no-fund

# The alternative build (binding.gyp, node-gyp) once, here: test/project/binding-gyp.test.ts checks it while the
# sources are unchanged (scripts/gyp-build.js).
node scripts/gyp-build.js > /dev/null

wait "$torch2_pch"
