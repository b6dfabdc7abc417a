#!/usr/bin/env python3
"""Prints, one a line, those of the C++ sources given whose includes never reach a torch header.

Both builds (CMakeLists.txt, scripts/gyp-build.js) compile the engine's sources with ATen's header precompiled and
force-included: a source that uses torch then reads it instead of parsing it. A source that does not (the CPU's GEMM
tiles, row math, block pool, the kernel checks) would pay for loading it all the same, more than its own compile
(bench/README.md, "Set-up and suite time"): they build the sources printed here without it.

A source reaches torch when it, or a project header it includes ("..." includes, found beside the including file or
under csrc/, followed through headers), includes <ATen/...>, <torch/...> or <c10/...>. A stale answer costs time,
never correctness: a source listed here that later includes torch compiles without the precompiled header, only
slower, and one that stops is still given it.

  python3 scripts/torch_free_sources.py SOURCE...
"""
import os
import re
import sys

CSRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'csrc')
LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
TORCH_INCLUDE = re.compile(r'^\s*#\s*include\s*<(ATen|torch|c10)/', re.M)


def included_file(name, including):
    for candidate in (os.path.join(os.path.dirname(including), name), os.path.join(CSRC, name)):
        if os.path.isfile(candidate):
            return os.path.normpath(candidate)
    return None  # a system header written with quotes: not ours to follow


def reaches_torch(path, known, visiting=frozenset()):
    if path in known:
        return known[path]
    with open(path, encoding='utf-8', errors='replace') as f:
        text = f.read()
    found = bool(TORCH_INCLUDE.search(text))
    for name in [] if found else LOCAL_INCLUDE.findall(text):
        header = included_file(name, path)
        if header and header not in visiting and reaches_torch(header, known, visiting | {path}):
            found = True
            break
    known[path] = found
    return found


def main(sources):
    known = {}
    for source in sources:
        if not reaches_torch(os.path.normpath(os.path.abspath(source)), known):
            print(source)


if __name__ == '__main__':
    main(sys.argv[1:])
