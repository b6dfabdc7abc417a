"""tq_cli from the GPU check's scripts (it has no Node: the engine runs through its command-line program)."""
import json
import os
import subprocess
import tempfile


def cli(args, calls, extra=()):
    """Runs `tq_cli answer` on the given calls; returns its JSON."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"calls": calls}, f)
    try:
        done = subprocess.run([args.cli, "answer", "--calls", f.name, *extra], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if done.returncode != 0:
        raise RuntimeError(f"tq_cli {' '.join(extra)}: {done.stderr.strip()}")
    return json.loads(done.stdout)
