#!/usr/bin/env python3
"""Weft's chat templates against Python's jinja2 set up as transformers'
apply_chat_template does (sandboxed, trim_blocks, lstrip_blocks, loop
controls, raise_exception, tojson as json.dumps): every template in
templates/ over generated conversations must render byte-identically, or
fail with the same raise_exception message.

    python3 test/chat/compare_templates.py build/tools/weft-chat-template/weft-chat-template
Exits 77 (skipped) when jinja2 is not installed.
"""
import json
import os
import random
import subprocess
import sys

try:
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("jinja2 is not installed: skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
PIECES = ["Hi", "hello there", "What is 2+2?", "  padded  ", "line one\nline two", "café ☕ 日本",
          "quotes ' and \"", "tabs\tand\\backslash", "", "Be brief.", "{{ not a tag }}", "🙂",
          "ends with newline\n", "<|eot_id|> in text"]


class Raised(Exception):
    pass


def raise_exception(message):
    raise Raised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def conversations(rng, n):
    out = []
    for i in range(n):
        msgs = []
        if rng.random() < 0.5:
            msgs.append({"role": "system", "content": rng.choice(PIECES)})
        turns = rng.randint(1, 6)
        alternate = rng.random() < 0.8
        for t in range(turns):
            role = ("user" if t % 2 == 0 else "assistant") if alternate else rng.choice(
                ["user", "assistant"])
            content = " ".join(rng.choice(PIECES) for _ in range(rng.randint(1, 3)))
            msgs.append({"role": role, "content": content})
        out.append({"messages": msgs, "add_generation_prompt": rng.random() < 0.7,
                    "bos_token": "<s>", "eos_token": "</s>"})
    return out


def main():
    tool = sys.argv[1]
    env = environment()
    rng = random.Random(2026)
    cases = conversations(rng, 60)
    failures = runs = 0
    for name in sorted(os.listdir(os.path.join(HERE, "templates"))):
        path = os.path.join(HERE, "templates", name)
        template = env.from_string(open(path, encoding="utf-8").read())
        for ctx in cases:
            runs += 1
            try:
                expected, ok = template.render(**ctx), True
            except Raised as e:
                expected, ok = str(e), False
            r = subprocess.run([tool, path], input=json.dumps(ctx).encode(), capture_output=True)
            got = r.stdout.decode(errors="replace")
            if ok and (r.returncode != 0 or got != expected):
                failures += 1
                print(f"MISMATCH {name}: {json.dumps(ctx)[:200]}\n  jinja2: {expected!r}\n"
                      f"  weft:   {got!r} {r.stderr.decode().strip()}")
            elif not ok and (r.returncode == 0 or expected not in r.stderr.decode()):
                failures += 1
                print(f"MISMATCH {name} (raise): jinja2 raised {expected!r}; weft: "
                      f"{r.stderr.decode().strip() or got!r}")
    print(f"{runs} renders, {failures} mismatches")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
