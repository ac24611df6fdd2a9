#!/usr/bin/env python3
"""The PTX of every kernel in weft kernel caches, and what differs between two.

    scripts/kernel_ptx.py [--by-base-name] BEFORE_CACHE AFTER_CACHE

Reads each entry (DIR/*.weftk, written by weft-compile --kernel-cache DIR:
magic "WEFTKRN1", key, source hash, then name, arch, cubin and PTX each as a
little-endian u64 length and bytes, then an xxh3 of all that; "WEFTKRN2"
adds the entry's symbol after the name) and compares, kernel name by kernel
name and architecture, the PTX texts the two caches hold (a name can stand
for several kernels, e.g. one per block-table size: compared as sets).
Prints every kernel whose PTX differs or that only one cache holds, and
exits 1 if any does, 0 if every kernel compiled to the same PTX.
scripts/kernel_refactor_check.sh fills the two caches.

--by-base-name compares across a change of the emitters, where a kernel's
source (and so the hash that ends its name) changes while its code must
not: kernels are keyed by their name without that hash, and each PTX has
its entry's symbol (an extern "C" name or a template instance's lowered
name) and its parameters' names replaced by placeholders first.

--counts (with --by-base-name) compares instead each name's instruction
counts, parameter loads set aside: for a change of a kernel's parameters
(their number and order change the PTX text, not what the body computes).
"""
import collections
import glob
import hashlib
import os
import struct
import sys

import re

MAGICS = (b"WEFTKRN1", b"WEFTKRN2")


def normalized(ptx, symbol):
    """The PTX with what an entry's form changes set aside: its symbol (and
    so its parameters' names), its linkage (an extern "C" entry is
    .visible, a template instance .weak) and the Config's RELEASE_EARLY
    constant, which a library entry's Config adds (NVRTC's -default-device
    emits every Config constant as a global)."""
    ptx = ptx.replace(symbol, "ENTRY")
    # Parameters as NVVM names them, or shortened (Nvrtc.cpp's
    # shortenPtxParams): the same placeholder.
    ptx = re.sub(r"\bwfp_(\d+)", r"ENTRY_param_\1", ptx)
    # Internal-linkage names embed the file NVRTC compiled, named after the
    # kernel ("_ZN75_INTERNAL_00000000_44_<name>_cu_a7e29c40...").
    ptx = re.sub(r"_ZN\d+_INTERNAL_[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]+(?:_\d+)?(?=\d+weft)",
                 "_ZN_INTERNAL_", ptx)
    ptx = re.sub(r"^\t// \.(globl|weak)\tENTRY$", "\t// ENTRY", ptx, flags=re.M)
    ptx = re.sub(r"^\.(visible|weak) \.entry ENTRY\(", ".entry ENTRY(", ptx, flags=re.M)
    return re.sub(r"^\.global \.align 1 \.u8 _ZN6Config13RELEASE_EARLYE( = 1)?;\n", "", ptx,
                  flags=re.M)


def instruction_count(ptx):
    """Instructions of the entry's body, parameter loads aside."""
    body = ptx[ptx.find(".entry"):]
    return sum(1 for line in body.splitlines()
               if line.startswith("\t") and not line.startswith(("\t.", "\t//"))
               and line.strip() and not line.strip().startswith("ld.param"))


def entries(cache, by_base_name=False, counts=False):
    """{(name, arch): [sha1 of its PTX (or its instruction count), ...]} of
    the cache's entries."""
    found = collections.defaultdict(list)
    for path in glob.glob(os.path.join(cache, "*.weftk")):
        data = open(path, "rb").read()
        magic = data[:8]
        if magic not in MAGICS:
            sys.exit(f"{path}: not a weft kernel cache entry")
        at = len(magic) + 16  # key, source hash

        def field():
            nonlocal at
            (n,) = struct.unpack_from("<Q", data, at)
            value = data[at + 8:at + 8 + n]
            at += 8 + n
            return value

        name = field()
        symbol = field() if magic == b"WEFTKRN2" else name
        arch, _cubin, ptx = field(), field(), field()
        name = name.decode()
        if by_base_name:
            name = re.sub(r"_[0-9a-f]{12}$", "", name)
            ptx = normalized(ptx.decode(errors="replace"), symbol.decode()).encode()
        key = (name, arch.decode())
        if counts:
            found[key].append(instruction_count(ptx.decode(errors="replace")))
        else:
            found[key].append(hashlib.sha1(ptx).hexdigest())
    return {k: sorted(v) for k, v in found.items()}


def main():
    args = sys.argv[1:]
    by_base_name = "--by-base-name" in args
    counts = "--counts" in args
    args = [a for a in args if a not in ("--by-base-name", "--counts")]
    if len(args) != 2:
        sys.exit(__doc__)
    before = entries(args[0], by_base_name, counts)
    after = entries(args[1], by_base_name, counts)
    if not before:
        sys.exit(f"{args[0]}: no kernel cache entries")
    differ = 0
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            what = ("only before" if key not in after else "only after" if key not in before
                    else f"instructions {before[key]} -> {after[key]}" if counts
                    else "PTX differs")
            print(f"{key[0]} ({key[1]}): {what}")
            differ += 1
    kernels = sum(len(v) for v in before.values())
    print(f"{kernels} kernels ({len(before)} names and architectures): "
          f"{('all the same instruction counts' if counts else 'all the same PTX') if not differ else f'{differ} differ'}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
