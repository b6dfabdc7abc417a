"""The GPU window in one command (issue 53; docs/gpu.md, "The window"), run by bench/gpu/run.sh:

    bash bench/gpu/run.sh OUT [--device auto|cuda|cpu] [--budget SECONDS] [--models DIR] [--build DIR]

A GPU is lent for 15 minutes in all, machine start included, at most 10 minutes a command, and of a run
only the output's last 12,000 characters and 8 files of OUT come back. So this runs the steps in order of
what we most need to know, each guarded (a failure is recorded, never the end of the run) and
time-limited (its own cap, and never past the budget: 520 s by default, which leaves the 600-second
limit room to pack), and after each step packs everything written so far into OUT/gpu.tgz (written
under another name, then moved: a kill at any moment leaves the last whole tarball) and prints the
step's summary. OUT holds gpu.tgz and summary.md, nothing else.

  0 preflight  versions, FlashAttention-2's schema, one varlen FA2 and one memory-efficient call with
               their LSE shapes asserted, the headers the build needs (preflight.py)
  1 build      tq_cli, and the server's addon where the bundle came along (one CMake build)
  2 models     bench-qwen3, tiny-qwen3, tiny-llama (make_models.py, one process; each alone where it fails)
  3 profile    the benchmark's four workloads on the default path under the profiler (tq_cli answer --profile),
               and on CUDA a question over a 16,000-token state, one with our few-row GEMM among the forms, two on
               split-key attention (a question's tiers) and the cold prefill without CUDA graphs
               (its cascade in the plan's shape, not the fixed form's); each call's kernels ranked (kernel_profile.py):
               the top 15 printed, all in profile.md; then on CUDA our few-row GEMM's tilings against cuBLAS, their
               µs and bits (tq_cli gemm-rows)
  4 bench      the benchmark alone (the fast path; on CUDA also with our few-row GEMM among the forms, without invariance
               and with its graphs cut between layers, on the CPU with split-key; and ATen's) against plain PyTorch with CUDA graphs and transformers
  5 invariance bf16 label logits of a 1,000-token state on bench-qwen3: alone, in a batch of 8, cached, another step
               size, bit for bit; on the fast path, with split-key, and on CUDA with our few-row GEMM among the forms
  6 selfcheck  qwen3 and llama, fp32 and bf16: fused against ATen layer by layer, graphs on against off; qwen3 again
               with split-key (its kernel on the GPU against its host twin on the CPU too)
  7 serve      the server with the same build and model (serve.sh)
  8 counters   on CUDA, Nsight Compute's counters: the first layer of a cold prefill and of the throughput call, the
               split-key kernel's first two launches, and `down` on 24 rows in each GEMM form (kernel_counters.py)
  9 probes     on CUDA, the forms a layer's GEMM can take on few rows with split-K off, timed and their bits checked
               (gemm_probe.py), and FlashAttention-2 on a tier's work alone and with the fixed form's empty sequences,
               and on a question over a 16,000-token state in 6 to 48 chunks (attention_probe.py --grids)
 10 rest       the other families' models and self-checks, the transformers cross-check, parity, fp8
 11 serve-engines  the serve step's load with two engine processes on the one device (--engines 2), as time allows

A machine's 15 minutes hold its start, one command of 600 s and, the machine still warm, a second of what is left
(about 3 minutes). The first runs as far as its budget goes: steps 0-7 come to about 430 s on a fresh H200 by the
last windows' step times. The second goes on where it stopped: the last run's finished steps and their files are
kept, and the steps it did not reach, or that its budget cut, run now (a budget 30 s under the command's timeout,
itself 30 s under the device time status says is left):

    bash bench/gpu/run.sh OUT --resume --budget 140

Without a GPU (--device cpu, or auto on a machine without one) every step runs on the CPU with the tiny
models (--models: the test suite's), the benchmark on tiny-qwen3 and short; steps that need transformers
or CUDA are reported as skipped. That is how CI proves this script (test/kernels/gpu-window.test.ts).
A step whose output names a CUDA error runs again once with CUDA_LAUNCH_BLOCKING=1, time allowing. The machinery
(budget, guarded steps, packing, --resume) is window_runner.py's; this file holds the steps.
"""
import argparse
import json
import lzma
import os
import shutil
import signal
import subprocess
import sys
import tarfile

from window_runner import HERE, MIN_STEP_S, ROOT, Runner, first_error, ok, read, stop_tree, tail, has_gpu

FIRST_MODELS = ["bench-qwen3", "tiny-qwen3", "tiny-llama"]
# In the order of what we most need to know (the module's docstring).
STEPS = ["preflight", "build", "models", "profile", "bench", "invariance", "selfcheck", "serve", "counters", "probes", "rest", "serve-engines"]
sys.path.insert(0, HERE)
from tiny import TINY, VISION  # noqa: E402
import kernel_counters  # noqa: E402 (its table helpers; it imports torch only to build its calls)


class Window(Runner):
    """The steps, in the order of STEPS; each returns (status, summary)."""

    def preflight(self):
        status, _ = self.script("preflight", "preflight.py", ["--out", self.work, "--device", self.args.device], 40)
        found = json.loads(read(os.path.join(self.work, "preflight.json")) or "{}")
        return ok(status), found.get("summary", "no preflight.json")

    def build(self):
        build = self.args.build
        targets = ["tq_cli", "cascade_check", "row_kernels_device_check"] + (["tqserve_engine"] if self.bundle else [])
        if self.bundle:
            self.unpack_bundle()
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            torch_dir = subprocess.run([self.python, "-c", "import os, torch; print(os.path.join(torch.utils.cmake_prefix_path, 'Torch'))"],
                                       capture_output=True, text=True, timeout=60).stdout.strip()
            # oneDNN off, as CI configures it too (test/project/cmake-build.test.ts): the GPU machine has no libdnnl.
            flags = [f"-DTorch_DIR={torch_dir}", "-DCMAKE_BUILD_TYPE=Release", "-DTQ_WITH_ONEDNN=OFF"]
            if shutil.which("nvcc"):
                flags.append(f"-DCMAKE_CUDA_COMPILER={shutil.which('nvcc')}")
            if os.environ.get("TQ_JSON_INCLUDE"):
                flags.append(f"-DTQ_JSON_INCLUDE={os.environ['TQ_JSON_INCLUDE']}")
            if self.bundle:  # the addon's Node-API headers come with the bundle's node_modules
                flags.append(f"-DCMAKE_JS_INC={ROOT}/node_modules/node-api-headers/include")
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            status, _ = self.run("build", ["cmake", "-S", ROOT, "-B", build, *generator, *flags], 120)
            if status != 0:
                return "failed", f"configure: {status}; " + first_error(os.path.join(self.work, "build.log"))
        status, seconds = self.run("build", ["cmake", "--build", build, "--target", *targets, "-j", str(os.cpu_count())], 300)
        if status != 0:
            return "failed", f"{status}; " + first_error(os.path.join(self.work, "build.log"))
        return "ok", f"{' '.join(targets)} in {seconds:.0f} s ({build})"

    def unpack_bundle(self):
        """The bundle's Node onto PATH (CMake asks node for node-addon-api's headers; serve.sh runs the server with
        it) and its dist/ and node_modules/ into the tree."""
        bundle, tools = os.path.join(ROOT, "bench", "gpu", "bundle"), os.path.join(self.args.build, "node-bin")
        if not os.path.exists(os.path.join(tools, "node")):
            os.makedirs(tools, exist_ok=True)
            with lzma.open(os.path.join(bundle, "node.xz")) as f, open(os.path.join(tools, "node"), "wb") as out:
                shutil.copyfileobj(f, out)
            os.chmod(os.path.join(tools, "node"), 0o755)
        os.environ["PATH"] = tools + os.pathsep + os.environ["PATH"]
        if not os.path.exists(os.path.join(ROOT, "dist", "tqserve.js")):
            with tarfile.open(os.path.join(bundle, "app.tar.xz")) as tar:
                tar.extractall(ROOT)

    def make_models(self, names, together=False):
        """Each model in its own make_models.py process, so that one a newer transformers breaks costs only itself; or,
        together, all in one process (one import of transformers, ~5 s, instead of one each), then each one still
        missing alone if that process failed."""
        make = [self.python, os.path.join(HERE, "make_models.py"), self.args.models]
        missing = [n for n in names if not self.have(n)]
        done = [f"{n} present" for n in names if n not in missing]
        if missing and not self.transformers:
            return done + [f"{n} skipped (no transformers)" for n in missing]
        if together and len(missing) > 1:
            status, seconds = self.run("models", make + missing, 180)
            if status == 0:
                return done + [f"{n} {'written' if self.have(n) else 'skipped (no class in this transformers)'}" for n in missing] + \
                    [f"in {seconds:.0f} s"]
            missing = [n for n in missing if not self.have(n)]
        for name in missing:
            status, seconds = self.run("models", make + [name], 120)
            result = ("written" if self.have(name) else "skipped (no class in this transformers)") if status == 0 else f"FAILED ({status})"
            done.append(f"{name} {result} in {seconds:.0f} s")
        return done

    def models(self):
        done = self.make_models(FIRST_MODELS, together=True)
        return ("ok" if not any("FAILED" in d for d in done) else "failed"), "; ".join(done)

    def have(self, name):
        return os.path.exists(os.path.join(self.args.models, name, "config.json"))

    def selfchecks(self, names):
        """The fused forward as it runs by default, then with a question's tiers on split-key attention (tiny-qwen3; in bf16
        alone on the GPU, the fast path's dtype: the kernel's fp32 form is compared with its host twin just before)."""
        split_key = ["--state-attention", "split-key"] + (["--dtypes", "bf16"] if self.cuda and not self.args.short else [])
        checks = [self.selfcheck(names), self.split_key_kernel(), self.merge_device(), self.row_kernels_device(),
                  self.selfcheck(names[:1], log="selfcheck-split-key", stem="selfcheck-split-key", extra=split_key)]
        return ("ok" if all(s == "ok" for s, _ in checks) else "failed"), " | ".join(f"{s}: {m}" for s, m in checks)

    def split_key_kernel(self):
        """Split-key attention's CUDA kernel against its host twin, bit for bit (test/native/cascade_check.cpp); on the
        CPU the comparison runs with the CPU standing in for the device."""
        found = self.device_check("split_key_kernel", "cascade_check", "split-key-device")
        if not found:
            return "failed", "split-key kernel: " + tail(os.path.join(self.work, "split_key_kernel.log"))
        r = found[-1]
        passed = r["differ"] == 0 and r["togetherDiffer"] == 0 and r["device"] == ("cuda" if self.cuda else "cpu")
        return ("ok" if passed else "failed"), (f"split-key kernel on {r['device']} against its host twin: {r['differ']} of {r['compared']} differ, "
                                                f"{r['togetherDiffer']} in the tiers' one launch")

    def merge_device(self):
        """The cascade's merge kernel against its CPU loop (test/native/cascade_check.cpp merge-device): within a rounding,
        as their expf may differ in the last bits (fp32 1e-5, bf16 one of its steps at 4); on the CPU the comparison runs
        with the CPU standing in for the device."""
        found = self.device_check("merge_device", "cascade_check", "merge-device")
        if not found:
            return "failed", "merge: " + tail(os.path.join(self.work, "merge_device.log"))
        r = found[-1]
        passed = r["worstFp32"] <= 1e-5 and r["worstBf16"] <= 3.2e-2 and r["device"] == ("cuda" if self.cuda else "cpu")
        return ("ok" if passed else "failed"), (f"merge on {r['device']} against its CPU loop: {r['differ']} of {r['compared']} differ, "
                                                f"{r['inPlaceDiffer']} of {r['inPlaceCompared']} in place, by at most {r['worstFp32']:.1e} (fp32), "
                                                f"{r['worstBf16']:.1e} (bf16)")

    def row_kernels_device(self):
        """The fused row kernels as the engine calls them, on CUDA against their host forms, bit for bit
        (test/native/row_kernels_device_check.cpp); on the CPU the comparison runs with the CPU standing in for the device."""
        found = self.device_check("row_kernels_device", "row_kernels_device_check")
        if not found:
            return "failed", "row kernels: " + tail(os.path.join(self.work, "row_kernels_device.log"))
        device = "cuda" if self.cuda else "cpu"
        passed = all(r["differ"] == 0 and r["device"] == device for r in found) and len(found) == 3
        return ("ok" if passed else "failed"), f"row kernels on {found[0]['device']} against their host forms: " + ", ".join(
            f"{r['part']} {r['differ']} of {r['compared']} differ" for r in found)

    def device_check(self, name, program, *args):
        """Runs a native check of the build (its log WORK/<name>.log); its JSON lines, none where it failed."""
        status, _ = self.run(name, [os.path.join(self.args.build, program), *args], 60)
        found = [json.loads(line) for line in read(os.path.join(self.work, f"{name}.log")).splitlines() if line.startswith("{")]
        return found if status == 0 else []

    def selfcheck(self, names, log="selfcheck", stem="selfcheck", extra=()):
        names = [n for n in names if self.have(n)]
        if not names:
            return "skipped", f"{stem}: no model"
        status, _ = self.script(log, "selfcheck.py", ["--cli", self.cli(), "--models", self.args.models, "--out", self.work, "--device",
                                                        self.args.device, "--only", ",".join(names), "--stem", stem, *self.short_dtypes(), *extra],
                                150, log=log)
        results = json.loads(read(os.path.join(self.work, f"{stem}.json")) or "{}")
        return ok(status), "; ".join(f"{k}: {first_beyond(r)}" for k, r in results.items()) or "no results"

    def bench_model(self):
        """bench-qwen3; on the CPU, where it was not made, tiny-qwen3."""
        return "bench-qwen3" if self.have("bench-qwen3") else ("tiny-qwen3" if not self.cuda and self.have("tiny-qwen3") else None)

    def check_part(self, part, model, extra=(), cap=200):
        """check.py --parts PART on the bench model, into WORK/PART.json; returns (status, its results)."""
        status, _ = self.script(part, "check.py", ["--cli", self.cli(), "--models", self.args.models, "--out", self.work, "--device",
                                                    self.args.device, "--parts", part, "--bench-model", model, "--stem", part, *self.short_state(),
                                                    *extra], cap)
        return ok(status), json.loads(read(os.path.join(self.work, f"{part}.json")) or "{}").get(part, {})

    def profile(self):
        """The benchmark's workloads on the default path under the profiler; their top kernels printed here, in full in
        profile.md."""
        model = self.bench_model()
        if model is None:
            return "skipped", "no bench-qwen3"
        status, profiled = self.check_part("profile", model, [] if self.cuda else ["--states", "2", "--step-sizes", "2048"], 120)
        print(read(os.path.join(self.work, "profile.md")), flush=True)
        parts = []
        for name, p in profiled.items():
            if "error" in p:
                parts.append(f"{name}: error {p['error'][:150]}")
                continue
            call = next(iter(p["calls"].values()))
            top = call["top"][0] if call["top"] else {"name": "none", "share": 0}
            busy = f"GPU busy {100 * call['gpu_busy_share']:.0f}% of {call['wall_us'] / 1000:.2f} ms" if p["device"] == "cuda" \
                else f"{call['wall_us'] / 1000:.2f} ms"
            parts.append(f"{name}: {busy}, top {top['name'][:60]} {100 * top['share']:.0f}%")
        return status, f"{model}: " + ("; ".join(parts) or "no results") + (self.own_gemm() if self.cuda else "")

    def counters(self):
        """On CUDA, Nsight Compute's counters (kernel_counters.py): why a kernel takes its time, where the profile says only
        how long."""
        model = self.bench_model()
        if not self.cuda or model is None:
            return "skipped", "needs CUDA (Nsight Compute) and bench-qwen3"
        return self.kernel_counters(model)

    def probes(self):
        """On CUDA, what the engine's own measurements leave open: the kernels cuBLAS runs for each form of a few-row GEMM
        (gemm_probe.py; the engine times the forms and prints its choice, gemmForms, but not their kernels), and what
        FlashAttention-2's empty blocks cost (attention_probe.py --grids)."""
        if not self.cuda:
            return "skipped", "needs CUDA"
        return "ok", "; ".join([self.gemm_forms(), self.attention_grids()])

    def gemm_forms(self):
        """The forms a layer's GEMM can take on few rows with split-K off (gemm_probe.py): the warm question's first
        kernel (a 64x256-tile GEMM for `down`, h200-2026-11-30-profile.md) against the forms that could replace it, each
        with its bits against a cold state's."""
        out = os.path.join(self.work, "gemm_probe.json")
        self.script("gemm_probe", "gemm_probe.py", ["--out", out], 60)
        shapes = json.loads(read(out) or "{}").get("shapes", {})
        if not shapes:
            return "GEMM forms: no results (gemm_probe.log)"

        def fastest(forms):
            same = [(e["us"], f) for f, e in forms.items() if "us" in e and e["same_bits_as_cold"] and f != "linear_split_k_allowed"]
            return f"{min(same)[1]} {min(same)[0]}" if same else "none with the same bits"
        return "GEMM forms at 32 rows, µs linear / split-K allowed / fastest with a cold row's bits: " + ", ".join(
            f"{name} {rows['32']['linear'].get('us', '-')}/{rows['32']['linear_split_k_allowed'].get('us', '-')}/{fastest(rows['32'])}"
            for name, rows in shapes.items() if "32" in rows)

    def own_gemm(self):
        """On CUDA, the few-row GEMM of our own (tq_cli gemm-rows: tensor cores down K in order, cp.async stages; a
        process of its own, so that a fault costs this probe alone) against cuBLAS at 24 rows: its fastest tiling's µs
        beside at::linear's, and whether it gives a cold state's row the same bits (else its largest difference: a
        rounding's, or a wrong fragment's). All rows (1 to 128) into WORK/own_gemm.json."""
        status, _ = self.run("own_gemm", [self.cli(), "gemm-rows", "--device", self.args.device], 30)
        printed = [line for line in read(os.path.join(self.work, "own_gemm.log")).splitlines() if line.startswith("{")]
        result = json.loads(printed[-1]) if printed else {}
        if "trials" not in result:
            return f"; own few-row GEMM: no results ({status}; own_gemm.log)"
        with open(os.path.join(self.work, "own_gemm.json"), "w") as f:
            json.dump(result, f, indent=1)
        names = {(4096, 1024): "qkv", (1024, 2048): "o", (6144, 1024): "gate_up", (1024, 3072): "down"}
        name = lambda t: names.get((t["out"], t["in"]), "{out}x{in}".format(**t))  # noqa: E731

        def fastest(t):  # the fastest tiling's µs and name, and the bits of them all (each tiling sums alike)
            best = min(t["own"], key=lambda o: o["us"])
            worst = max(o["maxAbsDiff"] for o in t["own"])
            bits = "same bits" if all(o["sameBits"] for o in t["own"]) else f"differs by up to {worst:.2g}"
            return f"{best['us']:.1f} ({best['form']}) / {t['linearUs']:.1f} ({bits})"
        return "; own few-row GEMM at 24 rows, µs fastest tiling / linear: " + ", ".join(
            f"{name(t)} {fastest(t)}" for t in result["trials"] if t["rows"] == 24 and t["own"])

    def attention_grids(self):
        """FlashAttention-2 on a tier's work launched alone and with the empty sequences and longest sequence the fixed
        form launched it with (attention_probe.py --grids): what its grid's empty blocks cost."""
        out = os.path.join(self.work, "attention_grids.json")
        self.script("attention_grids", "attention_probe.py", ["--grids", "--out", out], 50)
        groups = json.loads(read(out) or "{}").get("grids", {})
        if not groups:
            return "FA2 grids: no results (attention_grids.log)"
        us = lambda v: f"{v:.1f}" if isinstance(v, (int, float)) else "error"  # noqa: E731
        return "FA2 grids, µs a layer, the work alone / with the fixed form's padding: " + "; ".join(
            f"{group} " + " / ".join(us(v) for v in cases.values()) for group, cases in groups.items())

    def kernel_counters(self, model):
        """Nsight Compute's counters for the first layer of a cold prefill and of the throughput call, for the split-key
        kernel on a question over its state, and for `down` on 24 rows in each GEMM form (kernel_counters.py): which limit
        each of our kernels meets (memory, arithmetic, latency), and the attention's grid. Returns (status, summary)."""
        status, _ = self.script("kernel_counters", "kernel_counters.py", ["--cli", self.cli(), "--models", self.args.models, "--out", self.work,
                                                               "--bench-model", model, "--timeout", "25"], 135)
        found = json.loads(read(os.path.join(self.work, "kernel_counters.json")) or "{}")
        if not found:
            return ok(status), "kernel counters: none (kernel_counters.log)"
        name = lambda e: kernel_counters.short_name(e["kernel"])[:40]  # noqa: E731
        pct = lambda v: "-" if v is None else f"{v:.0f}%"  # noqa: E731
        parts = []
        for call, r in found.items():
            launches = r.get("launches", [])
            stalled = lambda e: f" stalled on {kernel_counters.top_stalls(e, 2)}" if e.get("stalls") else ""  # noqa: E731
            parts.append(f"{call} " + (", ".join(f"{name(e)} {e.get('us') or 0:.0f} µs {pct(e.get('memory_pct'))}{stalled(e)}" for e in launches[:12])
                                       if launches else f"none ({str(r.get('error'))[:120]})"))
        return ok(status), "ncu (first launches: µs, memory throughput of peak): " + "; ".join(parts)

    def invariance(self):
        model = self.bench_model()
        if model is None:
            return "skipped", "no bench-qwen3"
        status, inv = self.check_part("invariance", model, [] if self.cuda else ["--states", "7"], 120)
        if "error" in inv or not inv:
            return "failed", f"{model}: " + str(inv.get("error", "no results"))[:300]
        diffs = lambda r: ", ".join(f"{k} {v:.1e}" for k, v in r["max_abs_logit_diff"].items())  # noqa: E731
        # Each variant's (check.py's INVARIANCE_VARIANTS): split-key everywhere, our few-row GEMM on CUDA.
        variants = {"own-gemm": inv.get("own_gemm", {"error": "not run"})} if self.cuda else {}
        variants["split-key"] = inv.get("split_key", {"error": "not run"})
        passed = {name: "error" not in v and v["passed"] for name, v in variants.items()}
        says = "".join(f"; {name}: {str(v['error'])[:200]}" if "error" in v else
                       f"; {name}: {'bit-identical' if passed[name] else 'NOT bit-identical'} ({diffs(v)})" for name, v in variants.items())
        return (status if inv["passed"] and all(passed.values()) else "failed"), f"{model} bf16, {inv['state_tokens']} tokens: " + \
            ("bit-identical" if inv["passed"] else "NOT bit-identical") + f" ({diffs(inv)})" + says + self.gemm_rows()

    def gemm_rows(self):
        """On CUDA, where a bf16 GEMM row's bits change with the row count (row_invariance.py): as torch leaves cuBLAS,
        and with split-K off as the engine sets it. The cause, when the invariance above fails in a GEMM."""
        if not self.cuda:
            return ""
        out = os.path.join(self.work, "gemm_rows.json")
        self.script("gemm_rows", "row_invariance.py", ["--out", out], 60)
        rows = json.loads(read(out) or "{}")
        if not rows:
            return "; GEMM rows: no results (gemm_rows.log)"

        def moved(variant):
            parts = []
            for name, shape in rows.items():
                counts = [int(m) for m, d in shape.get(variant, {}).items() if d] if isinstance(shape, dict) else []
                if counts:
                    parts.append(f"{name} at {min(counts)}-{max(counts)} rows")
            return ", ".join(parts) or "none"
        return f"; GEMM rows moved, torch's cuBLAS: {moved('default')}; split-K off: {moved('no_split_k')}"

    def bench(self):
        model = self.bench_model()
        if model is None:
            return "skipped", "no bench-qwen3"
        quick = [] if self.cuda else (["--runs", "1", "--states", "2", "--step-sizes", "8192", "--paths", "tqserve_fast"] if self.args.short
                                      else ["--runs", "2", "--states", "4"])
        peer = [] if self.transformers and self.cuda else ["--no-peer"]
        status, _ = self.script("bench", "check.py", ["--cli", self.cli(), "--models", self.args.models, "--out", self.work, "--device",
                                                       self.args.device, "--parts", "benchmark", "--bench-model", model, "--stem", "bench",
                                                       *self.short_state(), *quick, *peer], 200)
        bm = json.loads(read(os.path.join(self.work, "bench.json")) or "{}").get("benchmark", {})
        ratios = " | ".join(f"against {peer}: " + "; ".join(f"{k} {v:.2f}x" for k, v in bm[key].items())
                            for key, peer in (("ratios_torch_graphs", "torch graphs"), ("ratios", "transformers")) if key in bm)
        if "ratios_split_key_vs_fast" in bm:
            ratios += " | split-key against fast: " + "; ".join(f"{k} {v:.2f}x" for k, v in bm["ratios_split_key_vs_fast"].items())
        if "ratios_own_gemm_vs_fast" in bm:
            chosen = {f"{f['out']}x{f['in']}": f["form"] for f in bm["tqserve_fast_own_gemm"].get("gemm_forms_warm", []) if f["rowBucket"] == 32}
            ratios += " | own GEMM against fast: " + "; ".join(f"{k} {v:.2f}x" for k, v in bm["ratios_own_gemm_vs_fast"].items()) + \
                (" (same bits" if bm.get("own_gemm_same_bits") else " (NOT the same bits") + f"; warm forms at 32 rows {chosen})"
        if "ratios_graph_chunks_vs_fast" in bm:
            ratios += " | graphs cut against fast: " + "; ".join(f"{k} {v:.2f}x" for k, v in bm["ratios_graph_chunks_vs_fast"].items())
        if "invariance_cost" in bm:
            ratios += " | invariance costs (fast over fast without it): " + "; ".join(f"{k} {v:.2f}x" for k, v in bm["invariance_cost"].items())
        summary = f"{model}: " + ((f"{bm.get('ratios_path', 'tqserve')} " + ratios if ratios else "") or
                                  ", ".join(f"{p} cold {bm[p]['cold_prefill_ms']:.1f} ms" for p in bm if isinstance(bm[p], dict) and "cold_prefill_ms" in bm[p])
                                  or str(bm.get("error", "no results"))[:300])
        return ok(status), summary + ("" if peer == [] else " (transformers peer skipped: " + ("no CUDA" if not self.cuda else "no transformers") + ")")

    def serve_env(self):
        """serve.sh's environment here, or (None, why the server cannot run)."""
        if self.bundle:  # its Node onto PATH (done by the build step, which a --resume may not run)
            self.unpack_bundle()
        local = not self.bundle and shutil.which("node") and os.path.exists(os.path.join(ROOT, "dist", "tqserve.js"))
        if not self.bundle and not local:
            return None, "no bench/gpu/bundle (bash bench/gpu/bundle.sh on a machine with Node, then carry it) and no node here"
        model = os.path.join(self.args.models, "bench-qwen3" if self.cuda else "tiny-qwen3")
        if not os.path.exists(os.path.join(model, "config.json")):
            return None, f"no {model}"
        env = {"TQ_BUILD": self.args.build, "TQ_MODEL": model, "TQ_DEVICE": self.args.device}
        if not self.cuda:  # the CPU form: a short load on the tiny model (serve-load.mjs's settings in the environment win)
            short = dict(TQ_LOAD_SECONDS="1" if self.args.short else "2", TQ_LOAD_CLIENTS="4", TQ_LOAD_RUNS="2", TQ_LOAD_STEADY_RUNS="4", TQ_LOAD_STATES="12")
            env.update({k: v for k, v in short.items() if k not in os.environ})
        return env, ""

    def serve(self):
        env, why = self.serve_env()
        if env is None:
            return "skipped", why
        status, _ = self.run("serve", ["bash", os.path.join(HERE, "serve.sh"), self.work], 180, env=env)
        result = json.loads(read(os.path.join(self.work, "serve.json")) or "{}")
        if not result:
            return ok(status), "no serve.json; " + tail(os.path.join(self.work, "serve.log"))
        load = result["load"]
        steady = result.get("warmAfterLoad")
        after = f" ({steady['p50']:.1f} after the load, {steady['beyondEngineP50']:.2f} beyond its engine call)" if steady else ""
        return ok(status), (f"cold p50 {result['cold']['p50']:.1f} ms, warm p50 {result['warm']['p50']:.1f} ms{after}, {load['requestsPerSecond']:.1f} req/s "
                            f"under {load['clients']} clients"
                            + (f" (the server's main thread {100 * load['serverMainThreadBusy']:.0f}% busy, its polling of the channel included)" if "serverMainThreadBusy" in load else "")
                            + (f", {100 * load['shareOfEngineAlone']:.0f}% of the engine alone"
                                                                   if "shareOfEngineAlone" in load else "")
                            + (f", {100 * load['shareOfInFlight']:.0f}% of it with two calls in flight" if "shareOfInFlight" in load else "")
                            + (f" ({result['engineInFlight']['promptTokensPerSecond'] / result['engineAlone']['promptTokensPerSecond']:.2f}x one at a time)"
                               if "engineInFlight" in result and "engineAlone" in result else ""))

    def serve_engines(self):
        """The serve step's load with two engine processes on the one device (`--engines 2`): they share its memory
        (src/server/engine-process/device-shares.ts: the first takes half the share, the other its size) and overlap each
        other's host work. Requests/s against the serve step's one engine; no engine-alone replay (the serve step's)."""
        env, why = self.serve_env()
        if env is None:
            return "skipped", why
        out = os.path.join(self.work, "serve-engines")
        env.update(TQ_SERVE_ARGS="--engines 2", TQ_LOAD_REPLAY="0")
        status, _ = self.run("serve-engines", ["bash", os.path.join(HERE, "serve.sh"), out], 150, env=env)
        # Its files beside the others, as two-engines-*: the serve step's names are taken, and WORK holds files only.
        for name in os.listdir(out) if os.path.isdir(out) else []:
            os.replace(os.path.join(out, name), os.path.join(self.work, f"two-engines-{name}"))
        shutil.rmtree(out, ignore_errors=True)
        two = json.loads(read(os.path.join(self.work, "two-engines-serve.json")) or "{}")
        if not two:
            return ok(status), "no serve.json; " + tail(os.path.join(self.work, "serve-engines.log"))
        one = json.loads(read(os.path.join(self.work, "serve.json")) or "{}")
        rate = two["load"]["requestsPerSecond"]
        against = f", {rate / one['load']['requestsPerSecond']:.2f}x one engine's" if one.get("load") else ""
        caches = ", ".join(f"{e['bytes'] / 2 ** 30:.2f} GiB ({e['from']})" for e in two["health"]["engines"])
        return ok(status), f"two engines: {rate:.1f} req/s under {two['load']['clients']} clients{against}; their caches {caches}"

    def rest(self):
        wanted = lambda names: [n for n in names if not self.args.families or n in self.args.families]  # noqa: E731
        others = wanted([n for n in TINY if n not in FIRST_MODELS])
        done = self.make_models(others + wanted(VISION), together=True)
        parts = [self.selfcheck(others, log="selfcheck-others", stem="selfcheck-others")]
        families = wanted(TINY)
        if self.transformers:
            devices = "cpu,cuda" if self.cuda else "cpu"
            status, _ = self.script("families", "families.py", ["--cli", self.cli(), "--models", self.args.models, "--out", self.work,
                                                                 "--devices", devices, "--only", ",".join(families + wanted(VISION))], 150)
            parts.append((ok(status), "families " + summarize(self.work, "families.json", "families")))
        else:
            parts.append(("skipped", "families: no transformers"))
        # Parity (the default forward against float64, bf16 bits across batch compositions), the mixtures of experts first,
        # then fp8: its kernels have not changed since its one run on a GPU (2026-11-28), while every window's kernels
        # under the default forward have.
        moe_first = sorted(families, key=lambda n: "moe" not in n and "mixtral" not in n)
        status, _ = self.script("parity", "check.py", ["--cli", self.cli(), "--models", self.args.models, "--out", self.work, "--device",
                                                        self.args.device, "--parts", "parity", "--only", ",".join(moe_first), "--stem", "parity",
                                                        *self.short_dtypes()], 200)
        parts.append((ok(status), "parity " + summarize(self.work, "parity.json", "parity")))
        if self.cuda:
            status, _ = self.script("fp8", "fp8.py", ["--cli", self.cli(), "--models", self.args.models, "--out", self.work], 150)
            parts.append((ok(status), "fp8 " + summarize(self.work, "fp8.json", "fidelity")))
        else:
            parts.append(("skipped", "fp8: needs CUDA"))
        status = "failed" if any(s.startswith("failed") for s, _ in parts) else "ok"
        return status, " | ".join(["; ".join(done) or "no other models", *(f"{s}: {m}" for s, m in parts)])

    def cli(self):
        return os.path.join(self.args.build, "tq_cli")

    def short_dtypes(self):
        """--short: the self-check and parity in fp32 alone."""
        return ["--dtypes", "fp32"] if self.args.short else []

    def short_state(self):
        """--short on the CPU: the benchmark's, the profile's and the invariance check's states of 300 tokens, not 1,000
        (a third of their time; a step of 256 tokens still cuts one in two)."""
        return ["--state-tokens", "300"] if self.args.short and not self.cuda else []


def first_beyond(r):
    if "error" in r:
        return "error: " + str(r["error"])[:200]
    first = r.get("firstBeyondBound")
    return "all within bound" if first is None else f"first beyond bound {first.get('name')}"


def summarize(work, file, key):
    """'k: passed/error' for each model of a results file's section."""
    section = json.loads(read(os.path.join(work, file)) or "{}").get(key, {})
    if not section:
        return "no results"
    return ", ".join(f"{k} " + ("error" if "error" in v else ("pass" if v.get("passed", True) else "FAIL")) for k, v in section.items())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    parser.add_argument("--budget", type=float, default=520, help="seconds for all steps (the device's limit is 600 a command)")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"), help="the CMake build folder (reused where configured)")
    parser.add_argument("--models", help="where the models are and are written (default: BUILD/models; on the CPU the test models)")
    parser.add_argument("--work", help="where the results are written before they are packed (default: BUILD/window)")
    parser.add_argument("--steps", default=",".join(STEPS))
    parser.add_argument("--resume", action="store_true", help="go on from the last run in WORK (the device's second command): its "
                        "finished steps and their files kept, the steps it did not reach or its budget cut run now")
    parser.add_argument("--families", help="the tiny families the rest step takes (default: all)")
    parser.add_argument("--short", action="store_true", help="the CPU form at its shortest (the suite's test): the self-check and parity "
                        "on tiny-qwen3 in fp32 alone, one run of each benchmark figure on the ATen and fast paths over 300-token states, a one-second load")
    args = parser.parse_args()
    if args.device == "auto":
        args.device = "cuda" if has_gpu() else "cpu"
    args.build = os.path.abspath(args.build)
    default_models = os.path.join(args.build, "models") if args.device == "cuda" else os.path.join(ROOT, "models")
    args.models = os.path.abspath(args.models or default_models)
    args.work = os.path.abspath(args.work or os.path.join(args.build, "window"))
    args.families = set(args.families.split(",")) if args.families else None
    os.makedirs(args.out, exist_ok=True)
    args.out = os.path.abspath(args.out)
    if not args.resume:
        shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.models, exist_ok=True)

    window = Window(args)
    if args.resume:
        window.steps = window.kept_steps()
        window.resumed = [s["step"] for s in window.steps]

    def on_signal(sig, _frame):  # stopped from outside: the running step's group goes too, then what is done is packed
        if window.child is not None:
            stop_tree(window.child)
        window.steps.append({"step": "window", "status": f"stopped by signal {sig}", "seconds": 0, "summary": ""})
        window.pack()
        sys.exit(128 + sig)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    steps = {"preflight": window.preflight, "build": window.build, "models": window.models,
             "profile": window.profile, "bench": window.bench, "invariance": window.invariance,
             "selfcheck": lambda: window.selfchecks(["tiny-qwen3"] if args.short else ["tiny-qwen3", "tiny-llama"]), "serve": window.serve,
             "counters": window.counters, "probes": window.probes, "rest": window.rest, "serve-engines": window.serve_engines}
    assert list(steps) == STEPS
    wanted = args.steps.split(",")
    for name in wanted:
        if name not in steps:
            parser.error(f"--steps: no step {name!r} (steps: {', '.join(steps)})")
    done = {s["step"] for s in window.steps}
    for name in (n for n in wanted if n not in done):
        if name not in ("preflight", "build", "models") and not os.path.exists(window.cli()):
            window.step(name, lambda: ("skipped", "no tq_cli (the build failed)"))
        elif window.left() < MIN_STEP_S:
            window.step(name, window.out_of_time)
        else:
            window.step(name, steps[name])
    print(f"packed: {os.path.join(args.out, 'gpu.tgz')} ({os.path.getsize(os.path.join(args.out, 'gpu.tgz'))} bytes)")


if __name__ == "__main__":
    main()
