#!/usr/bin/env python3
"""Runs the commands the README and docs/*.md show, as written.

Every fenced code block is read; each line that starts with a Weft tool is a
command. Commands run in document order, one temporary directory per page
(so `-o fused.mlir` then `weft-emit-cuda fused.mlir` works), with the
placeholders a reader replaces substituted by test equivalents:

  path/to/hf-checkpoint, /models/llama-3.1-8b, /srv/weft/llama-3.1-8b
      -> a Llama 3.1 8B checkpoint of safetensors headers only (all 32
         layers; test/Inputs/make_sparse_checkpoint.py)
  /models/llama-3.1-8b-awq -> the same in AWQ 4-bit, two layers (its
         codes are repacked beside a plan: kept small)
  /srv/weft/llama.weft -> llama.weft;  ~/.weft/plan-key -> plan-key;
  /etc/weft/trusted.pub -> plan-key.pub
  weft-detect -> against the fake NVML and a 3090 + 3060 desktop

Compiler-side tools (weft-compile, weft-opt, weft-inspect, weft-emit-cuda,
weft-detect, weft-tokenize, weft-chat-template) run and must exit 0. Tools
that need a GPU or a server (weft-run, weft-serve, weft-bench, and
weft-detect --calibrate) cannot run here: every --flag they are shown with must be one their --help lists.
Synopsis lines (with [optional] parts or PLACEHOLDERS) are checked the same
way, flag by flag against --help; lines that are output ("weft-compile: error: ...") are
skipped, as are the setup scripts and build commands CI runs itself.

  run_doc_commands.py SOURCE_DIR BUILD_DIR [FAKE_NVML]
Prints one line per command and a summary; exits 1 on a failure.
"""
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

RUNNABLE = ["weft-compile", "weft-opt", "weft-inspect", "weft-emit-cuda", "weft-detect",
            "weft-tokenize", "weft-chat-template"]
GPU = ["weft-run", "weft-serve", "weft-bench"]
LLVM_CL = ["weft-compile", "weft-opt", "weft-emit-cuda"]  # llvm::cl: --help-hidden lists all
SKIPPED = ["scripts/", "cmake ", "cpack ", "ctest ", "ninja ", "sudo ", "rsync ", "curl "]


def commands(path):
    """(line number, command) for every command line of a page's code blocks."""
    text = open(path, encoding="utf-8").read()
    for m in re.finditer(r"```[\w-]*\n(.*?)```", text, re.S):
        start = text.count("\n", 0, m.start()) + 2
        body = re.sub(r"\\\n\s*", " ", m.group(1))
        pending = None  # a command whose synopsis goes on in indented lines
        for i, raw in enumerate(body.splitlines()):
            if pending and raw[:1] == " " and raw.strip() and not raw.strip().startswith("#"):
                pending = (pending[0], pending[1] + " " + raw.strip())
                continue
            if pending:
                yield pending
                pending = None
            line = raw.strip()
            if line.startswith("$ "):
                line = line[2:]
            line = re.sub(r"\$W/[\w-]+/", "", line)
            line = re.sub(r"build/tools/[\w-]+/", "", line)
            first = line.split(" ", 1)[0] if line else ""
            if first in RUNNABLE + GPU or any(line.startswith(s) for s in SKIPPED):
                pending = (start + i, line)
        if pending:
            yield pending


def without_comment(line):
    # A '#' that starts a word begins a comment (none of the commands quote one).
    return re.sub(r"(^|\s)#.*$", "", line).strip()


def flags_of(line):
    """The --flags of a command line (values and quoted text left out)."""
    return re.findall(r"(?:^|[\s\[|(])(--[a-z][a-z0-9-]*)", re.sub(r"'[^']*'|\"[^\"]*\"", "", line))


def is_output(line):
    return re.match(r"^weft-[\w-]+: ", line) is not None


def is_synopsis(line):
    return "[" in line or re.search(r"\b(PLAN|MODEL|SPEC|FILE|NAME|DIR|ADDR|LIBRARY)\b", line) \
        or " | --" in line or "..." in line


def main():
    src, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    fake_nvml = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else ""
    tool_dirs = [os.path.join(build, "tools", t) for t in RUNNABLE + GPU]
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(tool_dirs + [env.get("PATH", "")])
    env["XDG_CACHE_HOME"] = os.path.join(build, "test", "docs-cache")
    if fake_nvml:
        env["WEFT_NVML_LIBRARY"] = fake_nvml
        env["WEFT_FAKE_NVML"] = os.path.join(src, "test", "detect", "boxes", "rtx3090+rtx3060.json")
    helps = {}

    def help_of(tool):
        """The tool's --help text (hidden options too, for LLVM's parsers)."""
        if tool not in helps:
            flag = "--help-hidden" if tool in LLVM_CL else "--help"
            out = subprocess.run([tool, flag], env=env, capture_output=True, text=True)
            helps[tool] = out.stdout + out.stderr
        return helps[tool]
    ckpt_root = tempfile.mkdtemp(prefix="weft-docs-ckpt-")
    ckpt = os.path.join(ckpt_root, "llama-3.1-8b")
    subprocess.run([sys.executable, os.path.join(src, "test", "Inputs", "make_sparse_checkpoint.py"),
                    ckpt, "--layers", "32"], check=True, stdout=subprocess.DEVNULL)
    awq = os.path.join(ckpt_root, "llama-3.1-8b-awq")
    subprocess.run([sys.executable, os.path.join(src, "test", "Inputs", "make_sparse_checkpoint.py"),
                    awq, "--layers", "2", "--quant", "awq", "--dtype", "float16"], check=True,
                   stdout=subprocess.DEVNULL)
    pages = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    ran = checked = skipped = 0
    failures = []
    for page in pages:
        name = os.path.relpath(page, src)
        with tempfile.TemporaryDirectory(prefix="weft-docs-") as tmp:
            for lineno, raw in commands(page):
                where = f"{name}:{lineno}"
                line = without_comment(raw)
                tool = line.split(" ", 1)[0]
                if is_output(raw) or not line:
                    continue
                if tool not in RUNNABLE + GPU:
                    skipped += 1
                    print(f"skip  {where}: {line[:90]} (setup and build: CI runs them)")
                    continue
                if is_synopsis(line):
                    checked += 1
                    missing = [f for f in flags_of(line) if f not in help_of(tool)]
                    if missing:
                        failures.append(f"{where}: {tool} has no {', '.join(missing)}")
                        print(f"FAIL  {where}: {tool}: {' '.join(missing)} not in --help")
                    else:
                        print(f"ok    {where}: {tool} synopsis: flags {' '.join(flags_of(line))} exist")
                    continue
                cmd = line.replace("/models/llama-3.1-8b-awq", awq)
                for placeholder in ("path/to/hf-checkpoint", "/models/llama-3.1-8b",
                                    "/srv/weft/llama-3.1-8b"):
                    cmd = cmd.replace(placeholder, ckpt)
                cmd = (cmd.replace("/srv/weft/llama.weft", "llama.weft")
                       .replace("~/.weft/plan-key", "plan-key")
                       .replace("/etc/weft/trusted.pub", "plan-key.pub"))
                cmd = cmd.rstrip("&").strip()
                if tool in GPU or (tool == "weft-detect" and "--calibrate" in cmd):
                    flags = flags_of(cmd)
                    missing = [f for f in flags if f not in help_of(tool)]
                    checked += 1
                    if missing:
                        failures.append(f"{where}: {tool} has no {', '.join(missing)}")
                        print(f"FAIL  {where}: {tool}: {' '.join(missing)} not in --help")
                    else:
                        print(f"ok    {where}: {tool}: flags {' '.join(flags) or '(none)'} exist")
                    continue
                out = subprocess.run(cmd, shell=True, cwd=tmp, env=env, capture_output=True,
                                     text=True, timeout=600)
                ran += 1
                if out.returncode != 0:
                    tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
                    failures.append(f"{where}: `{line}` exited {out.returncode}: {' | '.join(tail)}")
                    print(f"FAIL  {where}: {line}\n      exit {out.returncode}: {' | '.join(tail)}")
                else:
                    print(f"ok    {where}: {line[:110]}")
    print(f"\n{ran} commands ran, {checked} checked without a GPU, {skipped} skipped; "
          f"{len(failures)} failed")
    for f in failures:
        print("  " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
