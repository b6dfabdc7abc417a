#!/usr/bin/env python3
"""A copy of a shared library without the DT_NEEDED entries it takes no symbol from (CMakeLists.txt runs it).

Debian's libtorch_cpu names about twenty libraries it never uses (Caffe2's OpenCV, FFmpeg, LMDB, LevelDB, ZeroMQ,
OpenCL and Snappy: it was linked without --as-needed), and they bring about 250 more: every process that loads the
engine mapped, relocated and initialized 288 libraries where 41 do (bench/README.md, "Set-up and suite time"). A
NEEDED entry is dropped only when that library defines none of the symbols the copy leaves undefined, which is what
--as-needed would have decided at link time: no symbol can resolve differently, so nothing the engine computes can.

    lean_torch.py OUT_DIR LIBRARY

Writes OUT_DIR/<the library's SONAME> when there is something to drop (and prints its path), else removes any
earlier copy and prints nothing. Python's standard library only: the GPU machine's build runs it too.
"""
import mmap
import os
import struct
import subprocess
import sys

SHT_DYNAMIC, SHT_DYNSYM = 6, 11
DT_NULL, DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 14, 15, 29
STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 1, 2, 10


class Elf:
    """The dynamic section and dynamic symbols of a little-endian ELF64 file."""

    def __init__(self, data):
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ValueError("not a little-endian ELF64 file")
        self.data = data
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        self.sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

    def _section(self, kind):
        return next(s for s in self.sections if s[1] == kind)

    def string(self, table, offset):
        start = self.sections[table][4] + offset
        return self.data[start:self.data.find(b"\0", start)].decode()

    def dynamic(self):
        """[(tag, value)] up to DT_NULL, the section's offset, and its length in entries."""
        _, _, _, _, offset, size, link, _, _, _ = self._section(SHT_DYNAMIC)
        entries = []
        for i in range(size // 16):
            tag, value = struct.unpack_from("<qQ", self.data, offset + 16 * i)
            if tag == DT_NULL:
                break
            entries.append((tag, value))
        return entries, offset, size // 16, link

    def names(self, tag):
        entries, _, _, link = self.dynamic()
        return [self.string(link, value) for t, value in entries if t == tag]

    def symbols(self):
        """(undefined names, defined names) of the dynamic symbol table."""
        _, _, _, _, offset, size, link, _, _, entsize = self._section(SHT_DYNSYM)
        undefined, defined = set(), set()
        for i in range(1, size // entsize):
            name, info, _, shndx = struct.unpack_from("<IBBH", self.data, offset + i * entsize)
            if not name:
                continue
            if shndx == 0:
                undefined.add(self.string(link, name))
            elif info >> 4 in (STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE):
                defined.add(self.string(link, name))
        return undefined, defined


def read(path):
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def resolved_paths(path):
    """Library name -> path, as the dynamic loader finds them for `path` (ldd)."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>" and parts[2].startswith("/"):
            found[parts[0]] = parts[2]
    return found


def unused_needed(path, lib):
    """The NEEDED entries of `lib` (read from `path`) that define none of its undefined symbols (kept when not found:
    unsure)."""
    undefined, _ = lib.symbols()
    paths = resolved_paths(path)
    unused = []
    for name in lib.names(DT_NEEDED):
        if name not in paths:
            continue
        _, defined = Elf(read(paths[name])).symbols()
        if not undefined & defined:
            unused.append(name)
    return unused


def without_needed(data, drop):
    """The file's bytes with the named NEEDED entries removed (the rest in order, DT_NULL after)."""
    elf = Elf(data)
    entries, offset, capacity, link = elf.dynamic()
    kept = [(t, v) for t, v in entries if not (t == DT_NEEDED and elf.string(link, v) in drop)]
    out = bytearray(data)
    for i in range(capacity):
        struct.pack_into("<qQ", out, offset + 16 * i, *(kept[i] if i < len(kept) else (DT_NULL, 0)))
    return out


def main(out_dir, library):
    source = os.path.realpath(library)
    elf = Elf(read(source))
    target = os.path.join(out_dir, elf.names(DT_SONAME)[0])
    # A library that finds its own dependencies relative to itself (a pip wheel's: $ORIGIN) would not find them from
    # a copy elsewhere: left as it is.
    search_paths = elf.names(DT_RPATH) + elf.names(DT_RUNPATH)
    drop = [] if any("$ORIGIN" in p for p in search_paths) else unused_needed(source, elf)
    stamp = f"{source} {os.path.getsize(source)} {os.stat(source).st_mtime_ns} {sorted(drop)}\n"
    if not drop:
        for stale in (target, target + ".from"):
            if os.path.exists(stale):
                os.remove(stale)
        return
    current = os.path.exists(target) and os.path.exists(target + ".from") and open(target + ".from").read() == stamp
    if not current:
        os.makedirs(out_dir, exist_ok=True)
        with open(source, "rb") as f:
            lean = without_needed(f.read(), set(drop))
        with open(target + ".part", "wb") as f:
            f.write(lean)
        os.replace(target + ".part", target)
        with open(target + ".from", "w") as f:
            f.write(stamp)
    print(target)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
