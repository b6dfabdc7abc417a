"""The GPU window's machinery (window.py holds its steps): the time budget, each step run guarded and time-limited with
every process it starts, the results packed after each step (a kill at any moment leaves the last whole tarball),
and what a --resume keeps of the run before.
"""
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PACK_RESERVE_S = 10  # kept back from every step for the last pack
MIN_STEP_S = 2  # a part given less is not started ("no time left")
CUDA_ERROR = re.compile(r"CUDA error|cudaError|illegal memory access|device-side assert|an earlier CUDA error|misaligned address")


class Runner:

    def __init__(self, args):
        self.args, self.out, self.work = args, args.out, args.work
        self.deadline = time.monotonic() + args.budget
        self.steps = []
        self.python = sys.executable
        self.cuda = args.device == "cuda"
        self.transformers = importlib.util.find_spec("transformers") is not None
        self.bundle = os.path.isdir(os.path.join(ROOT, "bench", "gpu", "bundle"))
        self.child = None  # the running step's process, which a signal to the window stops too
        self.resumed = None  # with --resume, the last run's steps kept
        self.cut = False  # the running step lost a part to the budget (refused, or stopped short of its own cap)

    def left(self):
        return self.deadline - time.monotonic() - PACK_RESERVE_S

    # ------------------------------------------------------------------------------------------------ running
    def run(self, name, command, cap, env=None, log=None):
        """Runs command, output to WORK/<log or name>.log; it and every process it started are stopped at min(cap, time
        left). It stays in the window's process group, so a kill of that group (the device's limit) takes it too.
        Returns (exit status or "timeout", seconds)."""
        limit = min(cap, self.left())
        if limit < MIN_STEP_S:
            self.cut = True
            return "no time left", 0.0
        path = os.path.join(self.work, f"{log or name}.log")
        start = time.monotonic()
        with open(path, "a") as f:
            f.write(f"$ {' '.join(command)}\n")
            f.flush()
            child = subprocess.Popen(command, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
            self.child = child
            try:
                status = child.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                stop_tree(child)
                status = "timeout"
                self.cut = self.cut or limit < cap  # stopped by the budget, not by its own cap: a --resume runs it again
                f.write(f"\n[window] killed after {limit:.0f} s\n")
            self.child = None
        return status, time.monotonic() - start

    def step(self, name, fn):
        """One step, guarded: its summary recorded (and whether the budget cut it) and printed, everything packed after it."""
        start = time.monotonic()
        self.cut = False
        try:
            status, summary = fn()
        except Exception as e:  # a step's own bug must not end the window
            status, summary = "failed", f"{type(e).__name__}: {e}"
        entry = {"step": name, "status": status, "seconds": round(time.monotonic() - start, 1), "summary": summary, "cut": self.cut}
        self.steps.append(entry)
        print(f"[{len(self.steps) - 1}] {name}: {status} in {entry['seconds']} s: {summary}", flush=True)
        self.pack()

    def out_of_time(self):
        """A step the budget left no time for: cut, so that a --resume runs it."""
        self.cut = True
        return "skipped", "no time left"

    def kept_steps(self):
        """--resume: the last run's steps (WORK/window.json) that finished, which this run keeps and does not run again;
        not one its budget cut, nor the one a signal stopped (never recorded)."""
        last = json.loads(read(os.path.join(self.work, "window.json")) or "{}").get("steps", [])
        return [s for s in last if s["step"] != "window" and not s.get("cut")]

    def pack(self):
        resumed = f"; resumed, kept from the run before: {', '.join(self.resumed) or 'nothing'}" if self.resumed is not None else ""
        lines = [f"# GPU window: --device {self.args.device}", "", f"budget {self.args.budget} s; transformers "
                 f"{'present' if self.transformers else 'absent'}; server bundle {'present' if self.bundle else 'absent'}{resumed}", "",
                 "| step | status | seconds | summary |", "|---|---|---|---|"]
        lines += [f"| {s['step']} | {s['status']} | {s['seconds']} | {str(s['summary']).replace('|', '/')[:600]} |" for s in self.steps]
        with open(os.path.join(self.work, "window.json"), "w") as f:
            json.dump({"device": self.args.device, "budget_s": self.args.budget, "steps": self.steps}, f, indent=2)
        md = "\n".join(lines) + "\n"
        with open(os.path.join(self.work, "window.md"), "w") as f:
            f.write(md)
        part = os.path.join(self.out, "gpu.tgz.part")
        with tarfile.open(part, "w:gz") as tar:
            for name in sorted(os.listdir(self.work)):
                tar.add(os.path.join(self.work, name), arcname=name)
        os.replace(part, os.path.join(self.out, "gpu.tgz"))
        with open(os.path.join(self.out, "summary.md.part"), "w") as f:
            f.write(md)
        os.replace(os.path.join(self.out, "summary.md.part"), os.path.join(self.out, "summary.md"))

    def script(self, name, script, args, cap, log=None):
        """A Python script of this folder as a step's part; reruns it once with CUDA_LAUNCH_BLOCKING=1 where its log or
        results name a CUDA error (the scripts record a model's error in their results and go on)."""
        command = [self.python, os.path.join(HERE, script), *args]
        started = time.time()
        status, seconds = self.run(name, command, cap, log=log)
        written = [os.path.join(self.work, f) for f in os.listdir(self.work)
                   if not f.startswith("window.") and os.path.getmtime(os.path.join(self.work, f)) >= started]
        if self.cuda and any(CUDA_ERROR.search(read(f)) for f in written):
            status, more = self.run(name, command, cap, env={"CUDA_LAUNCH_BLOCKING": "1"}, log=f"{log or name}.blocking")
            status = f"{status} (rerun with CUDA_LAUNCH_BLOCKING=1: {log or name}.blocking.log)"
            seconds += more
        return status, seconds

def ok(status):
    """A part's status for the summary: "ok", or what run() said ("timeout", "no time left"), or the exit status."""
    if status == 0:
        return "ok"
    return status if isinstance(status, str) else f"failed ({status})"


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def tail(path, n=600):
    return read(path)[-n:].replace("\n", " / ")


def first_error(log):
    """A failed build's first compiler or CMake error (the line that says why; the log's end says only that it
    stopped), else the log's end."""
    for line in read(log).splitlines():
        if re.search(r"\berror\b|CMake Error", line) and not line.startswith("$ "):
            return "first error: " + line.strip()[:400]
    return tail(log)


def descendants(pid):
    """Every process below pid, from /proc (parent links; taken before any is signalled, as the dead's children are
    handed to init)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for kid in children.get(todo.pop(), []):
            out.append(kid)
            todo.append(kid)
    return out


def stop_tree(child):
    """SIGTERM to the child and everything it started (a server, its engines, tq_cli), SIGKILL 5 s later to what is left."""
    tree = [child.pid, *descendants(child.pid)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in tree:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if sig == signal.SIGTERM:
            time.sleep(0.2)  # the others' own exits


def has_gpu():
    """nvidia-smi answers; where it is not installed, torch says so."""
    for command in (["nvidia-smi", "-L"], [sys.executable, "-c", "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"]):
        try:
            return subprocess.run(command, capture_output=True, timeout=60).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            continue
    return False
