#!/usr/bin/env python3
"""Writes the translation units the engine's builds compile, and prints them, one a line.

Each folder of sources is compiled as one translation unit (a file that includes them all), not file by file: every
source of the engine includes ATen, and each translation unit pays once for its header and again for generating the
same inline templates at -O3, which was most of a file's compile time (bench/README.md, "Set-up and suite time").
The builds compile the units this writes (CMakeLists.txt, a CUDA build's too, and binding.gyp), so all compile the same
code together, and CI checks a CUDA build's C++ unit by unit (test/kernels/cuda.test.ts).

The sources with code for chosen instruction sets (the CPU kernels' GEMM tiles, bf16, softmax and SwiGLU: functions with
__attribute__((target)), named in FILE_BY_FILE) compile file by file. That keeps their arithmetic what each file
alone gives: in a unit, a function of another file could be inlined into one compiled for FMA, and a multiply and add
across the two could then be contracted into one rounding. The other sources are compiled for the baseline
instruction set, which has no FMA, so none of their arithmetic depends on what is compiled together.
test/project/compile-units.test.ts holds that rule: no source in a unit reaches such code.

A unit wraps each source in `#pragma GCC push_options`/`pop_options` and undefines the macros the source defines, so
that neither a `#pragma GCC optimize` nor a macro reaches the next one. A folder with one source compiles it as it is.
A unit is written only when its text changes, so that configuring again rebuilds nothing.

  python3 scripts/compile_units.py --out DIR (SOURCE | FOLDER)...
    FOLDER: its .cpp files and its subfolders'. Prints the units written under DIR (paths as DIR is given), then the
    sources compiled alone (as given): those named above, and any SOURCE that is not C++ (a CUDA build's .cu).
"""
import os
import re
import sys

CSRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'csrc'))
# Relative to csrc/: the sources compiled file by file (the docstring says why).
FILE_BY_FILE = {
    'kernels/cpu/bf16.cpp',
    'kernels/cpu/gemm/gemm_amx.cpp', 'kernels/cpu/gemm/gemm_amx_bf16.cpp', 'kernels/cpu/gemm/gemm_dpbf16.cpp',
    'kernels/cpu/gemm/gemm_fma.cpp', 'kernels/cpu/gemm/gemm_maddubs.cpp', 'kernels/cpu/gemm/gemm_vnni.cpp',
    'kernels/cpu/rows/softmax.cpp', 'kernels/cpu/rows/swiglu.cpp',
}
DEFINE = re.compile(r'^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)', re.M)


def sources_of(paths):
    found = []
    for p in paths:
        if os.path.isdir(p):
            for d, _, files in os.walk(p):
                found += [os.path.join(d, f) for f in files if f.endswith('.cpp')]
        else:
            found.append(p)
    return sorted(set(found))  # a folder and its subfolder may both be named


def in_csrc(source):
    """The source's path relative to csrc/ ('engine/engine.cpp'), or None outside csrc/."""
    rel = os.path.relpath(os.path.abspath(source), CSRC)
    return None if rel.startswith('..') else rel.replace(os.sep, '/')


def unit_text(folder, members, out):
    lines = [f'// Written by scripts/compile_units.py: csrc/{folder}/ as one translation unit.']
    for source in members:
        with open(source, encoding='utf-8', errors='replace') as f:
            macros = sorted(set(DEFINE.findall(f.read())))
        included = os.path.relpath(os.path.abspath(source), os.path.abspath(out))
        lines += ['#pragma GCC push_options', f'#include "{included}"', '#pragma GCC pop_options']
        lines += [f'#undef {m}' for m in macros]
    return '\n'.join(lines) + '\n'


def write_if_changed(path, text):
    if os.path.exists(path):
        with open(path, encoding='utf-8') as f:
            if f.read() == text:
                return
    with open(path, 'w', encoding='utf-8') as f:
        f.write(text)


def main(args):
    if len(args) < 2 or args[0] != '--out':
        sys.exit('usage: compile_units.py --out DIR (SOURCE | FOLDER)...')
    out, sources = args[1], sources_of(args[2:])
    folders, alone = {}, []
    for source in sources:
        rel = in_csrc(source)
        if rel is None or rel in FILE_BY_FILE or not rel.endswith('.cpp'):  # a CUDA build's .cu files are nvcc's
            alone.append(source)
        else:
            folders.setdefault(os.path.dirname(rel), []).append(source)
    os.makedirs(out, exist_ok=True)
    units = []
    for folder, members in sorted(folders.items()):
        if len(members) == 1:
            alone.append(members[0])
            continue
        unit = os.path.join(out, folder.replace('/', '_') + '.cpp')
        write_if_changed(unit, unit_text(folder, members, out))
        units.append(unit)
    print('\n'.join(units + sorted(alone)))


if __name__ == '__main__':
    main(sys.argv[1:])
