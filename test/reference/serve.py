"""The float64 references as one long-lived process: a test file starts it once
(test/helpers/python-reference.ts) rather than one interpreter per call, each
of which spent ~1.7 s importing torch. Reads one JSON request per line,
{"script": "forward" | "ref_vlm", "request": {...}} (the request the script
reads on its standard input when run alone), and writes one JSON line per
request: {"result": ...} or {"error": "..."}.
"""
import json
import os
import sys
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import forward  # noqa: E402
import ref_vlm  # noqa: E402

SCRIPTS = {"forward": forward.run, "ref_vlm": ref_vlm.run}


def main():
    torch.set_num_threads(2)
    for line in sys.stdin:
        try:
            msg = json.loads(line)
            reply = {"result": SCRIPTS[msg["script"]](msg["request"])}
        except Exception:  # reported to the test that asked; the process serves the next request
            reply = {"error": traceback.format_exc()}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
