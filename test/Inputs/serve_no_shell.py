"""weft-serve starts weft-compile without a shell.

Usage: serve_no_shell.py WEFT_SERVE WORKDIR

Puts a copy of weft-serve in WORKDIR/bin beside a fake weft-compile that
writes the arguments it got, one per line in brackets, and fails; then runs
weft-serve --model with shell syntax in every string that reaches the
command (the model directory, the topology, --compile-args and the cache
directory from XDG_CACHE_HOME). Prints weft-serve's exit status and error,
the arguments weft-compile got, and every file a shell would have created
(there must be none). A second run starts weft-serve by its bare name from
a current directory holding a weft-compile, with an empty (current
directory) PATH entry: that one must not run either.
"""
import os
import shutil
import stat
import subprocess
import sys

serve, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
bin_dir = os.path.join(work, "bin")
os.makedirs(bin_dir)
shutil.copy2(serve, os.path.join(bin_dir, "weft-serve"))
log = os.path.join(work, "argv.txt")
fake = os.path.join(bin_dir, "weft-compile")
with open(fake, "w") as f:
    f.write('#!/bin/sh\nfor a in "$@"; do printf \'[%s]\\n\' "$a"; done > "$WEFT_FAKE_COMPILE_LOG"\n'
            'exit 3\n')
os.chmod(fake, os.stat(fake).st_mode | stat.S_IXUSR)


def pwn(tag):
    # Each form of shell injection creates its own file, in WORKDIR.
    return os.path.join(work, "PWNED-" + tag)


model = os.path.join(work, "model';touch " + pwn("model-quote") + ";'$(touch " + pwn("model-subst") + ")")
os.makedirs(model)
shutil.copy(os.path.join(os.path.dirname(__file__), "..", "fixtures", "llama", "config.json"), model)
topology = "h200'; touch " + pwn("topology") + "; echo '"
cache = os.path.join(work, "cache\"`touch " + pwn("cache") + "`")
compile_args = ("--max-batch 8 ; touch " + pwn("semicolon") + " && touch " + pwn("and") +
                " '$(touch " + pwn("single") + ")' \"a b\" `touch " + pwn("backtick") +
                "` | > " + pwn("redirect"))
env = dict(os.environ, XDG_CACHE_HOME=cache, WEFT_FAKE_COMPILE_LOG=log)
r = subprocess.run([os.path.join(bin_dir, "weft-serve"), "--model", model, "--topology", topology,
                    "--compile-args", compile_args, "--quiet"],
                   cwd=work, env=env, capture_output=True, text=True)
print("exit", r.returncode)
print("stderr", r.stderr.strip().replace(work, "WORK"))
with open(log) as f:
    print(f.read().replace(work, "WORK"), end="")

# The bare name, from a directory that holds a weft-compile of its own.
os.remove(fake)
cwd = os.path.join(work, "cwd")
os.makedirs(cwd)
trap = os.path.join(cwd, "weft-compile")
with open(trap, "w") as f:
    f.write("#!/bin/sh\ntouch " + pwn("cwd") + "\nexit 3\n")
os.chmod(trap, os.stat(trap).st_mode | stat.S_IXUSR)
env = dict(os.environ, XDG_CACHE_HOME=os.path.join(work, "cache2"), PATH=bin_dir + "::.")
r = subprocess.run(["weft-serve", "--model", model, "--topology", "h200", "--quiet"],
                   cwd=cwd, env=env, capture_output=True, text=True)
print("bare exit", r.returncode)
print("bare stderr", r.stderr.strip().replace(work, "WORK"))
print("created", sorted(n for n in os.listdir(work) if n.startswith("PWNED")))
