#!/usr/bin/env python3
"""The PTX of every kernel in weft kernel caches, and what differs between two.

    scripts/kernel_ptx.py BEFORE_CACHE AFTER_CACHE

Reads each entry (DIR/*.weftk, written by weft-compile --kernel-cache DIR:
magic "WEFTKRN1", key, source hash, then name, arch, cubin and PTX each as a
little-endian u64 length and bytes, then an xxh3 of all that) and compares,
kernel name by kernel name and architecture, the PTX texts the two caches
hold (a name can stand for several kernels, e.g. one per block-table size:
compared as sets). Prints every kernel whose PTX differs or that only one
cache holds, and exits 1 if any does, 0 if every kernel compiled to the same
PTX. scripts/kernel_refactor_check.sh fills the two caches.
"""
import collections
import glob
import hashlib
import os
import struct
import sys

MAGIC = b"WEFTKRN1"


def entries(cache):
    """{(name, arch): [sha1 of its PTX, ...]} of the cache's entries."""
    found = collections.defaultdict(list)
    for path in glob.glob(os.path.join(cache, "*.weftk")):
        data = open(path, "rb").read()
        if not data.startswith(MAGIC):
            sys.exit(f"{path}: not a weft kernel cache entry")
        at = len(MAGIC) + 16  # key, source hash

        def field():
            nonlocal at
            (n,) = struct.unpack_from("<Q", data, at)
            value = data[at + 8:at + 8 + n]
            at += 8 + n
            return value

        name, arch, _cubin, ptx = field(), field(), field(), field()
        found[(name.decode(), arch.decode())].append(hashlib.sha1(ptx).hexdigest())
    return {k: sorted(v) for k, v in found.items()}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    before, after = entries(sys.argv[1]), entries(sys.argv[2])
    if not before:
        sys.exit(f"{sys.argv[1]}: no kernel cache entries")
    differ = 0
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            what = ("only before" if key not in after else "only after" if key not in before
                    else "PTX differs")
            print(f"{key[0]} ({key[1]}): {what}")
            differ += 1
    kernels = sum(len(v) for v in before.values())
    print(f"{kernels} kernels ({len(before)} names and architectures): "
          f"{'all the same PTX' if not differ else f'{differ} differ'}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
