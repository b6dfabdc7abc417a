#!/usr/bin/env bash
# The CPU profile (issues 42 and 44; bench/README.md): what a session on a CPU kind not measured before runs, in one
# command, after the set-up (bash scripts/setup.sh):
#   bash bench/cpu/run.sh OUT_DIR
# OUT_DIR/cpu.txt: the CPU (model name, flags, lscpu) and the levels this build runs on it; then each part's output
# in OUT_DIR/<part>.txt, with its command and wall time in OUT_DIR/summary.md:
#   engine    npm run bench: the GEMMs and the 1,000-token bf16 prefill at every level, beside llama.cpp (issue 44's table)
#   serving   npm run bench:serving at the default level, and with each other exact level forced (TQ_KERNELS), so
#             the default can be checked against the fastest level forced by hand
#   frontend  npm run bench:frontend: the server's own time per request
#   soak      npm run bench:soak, SOAK_MINUTES (default 2) per level: the largest difference between identical
#             requests, per level and route (issue 42: must be 0 everywhere)
#   startup   npm run bench:startup
#   start-parts  npm run bench:start-parts: the CPU of the tokenizer's load, an engine's open and the server's own steps
#             at start, in fresh processes
#   suite     a newcomer's first hour (issue 66): a fresh clone of HEAD, its set-up (bash scripts/setup.sh), then its
#             test suite through npm run bench:suite (jest as npm test runs it, with the CPU by file and by process),
#             each timed
# TQ_CPU_PARTS picks the parts (default "engine frontend soak startup serving": the longest last; start-parts and
# suite only when named).
set -uo pipefail
out=${1:?usage: bench/cpu/run.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/../.."
parts=${TQ_CPU_PARTS:-engine frontend soak startup serving}

levels=$(npx ts-node --transpile-only -e "console.log(require('./test/helpers/cpu').runnableIsaLevels().join(' '))")
{
  grep -m1 'model name' /proc/cpuinfo
  echo "levels this build runs here: $levels"
  echo "flags: $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2)"
  echo
  lscpu
} > "$out/cpu.txt" 2>&1

summary="$out/summary.md"
{
  echo "# CPU profile, $(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) CPUs"
  echo
  echo "| part | command | exit | seconds |"
  echo "|---|---|---|---|"
} > "$summary"

# run NAME COMMAND...: the command's output to OUT_DIR/NAME.txt, a row in the summary.
run() {
  local name=$1
  shift
  local start=$SECONDS
  echo "== $name: $*"
  env "$@" > "$out/$name.txt" 2>&1
  local status=$?
  echo "| $name | \`$*\` | $status | $((SECONDS - start)) |" >> "$summary"
}

for part in $parts; do
  case $part in
    engine) run engine npm run -s bench ;;
    frontend) run frontend npm run -s bench:frontend ;;
    soak) run soak SOAK_MINUTES="${SOAK_MINUTES:-2}" npm run -s bench:soak ;;
    startup) run startup npm run -s bench:startup ;;
    start-parts) run start-parts npm run -s bench:start-parts ;;
    suite)
      clone=$(mktemp -d)
      git clone -q . "$clone/tqserve"
      run suite-setup bash -c "cd '$clone/tqserve' && bash scripts/setup.sh"
      run suite-test bash -c "cd '$clone/tqserve' && npm run -s bench:suite"
      rm -rf "$clone"
      ;;
    serving)
      run serving-default npm run -s bench:serving
      for level in $levels; do
        [ "$level" = generic ] || run "serving-$level" TQ_KERNELS="$level" npm run -s bench:serving
      done
      ;;
    *) echo "unknown part: $part (engine, frontend, soak, startup, start-parts, serving, suite)" >&2; exit 2 ;;
  esac
done
cat "$summary"
