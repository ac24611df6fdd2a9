#!/usr/bin/env python3
"""Checks that Weft's source folders include headers downwards only
(docs/architecture.md, "Dependencies"): the runtime includes nothing of the
dialects, compiler, back end or tools; the dialects nothing of the compiler,
back end or tools; the compiler nothing of the back end or tools; the back
end nothing of the tools. Prints each offending include and exits 1.

    check_layering.py SOURCE_DIR
"""
import os
import re
import sys

# Folder -> the top-level folders it may not include from.
FORBIDDEN = {
    "runtime": ("dialects", "compiler", "targets", "tools"),
    "dialects": ("compiler", "targets", "tools"),
    "compiler": ("targets", "tools"),
    "targets": ("tools",),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main():
    root = sys.argv[1]
    bad = []
    for top, forbidden in FORBIDDEN.items():
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith((".h", ".cpp", ".cuh", ".td")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line) or re.match(r'^\s*include\s+"([^"]+)"', line)
                        if m and m.group(1).split("/")[0] in forbidden:
                            bad.append(f"{os.path.relpath(path, root)}:{number}: {top}/ "
                                       f"includes {m.group(1)}")
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} include(s) point back up (docs/architecture.md, Dependencies)")
        return 1
    print("layering: every include points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
