"""tq_cli from the GPU check's scripts (it has no Node: the engine runs through its command-line program)."""
import json
import os
import subprocess
import tempfile

# Seconds one tq_cli process may take (TQ_CLI_TIMEOUT): a hung kernel fails its model, not the window.
TIMEOUT = float(os.environ.get("TQ_CLI_TIMEOUT", 240))


def run_cli(args, command, extra=()):
    """Runs `tq_cli command extra...`; returns its JSON, or raises RuntimeError with its error (or the timeout)."""
    try:
        done = subprocess.run([args.cli, command, *extra], capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"tq_cli {command} {' '.join(extra)}: no answer after {TIMEOUT:.0f} s") from None
    if done.returncode != 0:
        raise RuntimeError(f"tq_cli {command} {' '.join(extra)}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def cli(args, calls, extra=()):
    """Runs `tq_cli answer` on the given calls; returns its JSON."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"calls": calls}, f)
    try:
        return run_cli(args, "answer", ["--calls", f.name, *extra])
    finally:
        os.unlink(f.name)


def write_results(out, stem, results, md):
    """OUT/stem.json and OUT/stem.md, each written under another name and then moved: called after every model, so
    a step killed mid-way keeps what it finished."""
    for ext, text in (("json", json.dumps(results, indent=2)), ("md", md)):
        path = os.path.join(out, f"{stem}.{ext}")
        with open(path + ".part", "w") as f:
            f.write(text)
        os.replace(path + ".part", path)
