#!/usr/bin/env python3
"""GPU check of compiled plans against Hugging Face transformers.

make_plans.sh writes DIR/checks.jsonl: one line per check (a plan, the model
it was compiled for, dtype, prompt length, steps, declared devices). For each
check this builds the model in transformers with random weights (or loads a
committed fixture), saves it as safetensors, runs the C++ runtime
(weft-run) on the plan and those weights, and compares on the same GPU:

  * the logits of the last prompt token, relative to max |logit| of the fp32
    truth (the same weights in fp32), against 1e-2 or transformers' own
    error in the model's dtype (x1.5), whichever is larger;
  * greedy tokens: identical to transformers' for every step, or, where
    the two sequences part, a tie: after the common prefix the fp32 truth
    scores both tokens within twice the measured logits error ("tie",
    reported with the gap).

Two-device plans run with both declared devices on GPU 0 (peer copies) and,
when the machine has two GPUs, on GPUs 0 and 1 (NCCL / peer-to-peer).

A model "quant:NAME" is a quantized checkpoint DIR/NAME that weft-run reads
and its dequantized twin DIR/NAME-dequant that transformers runs (the same
f16 weights, so the math is compared exactly). A model "rtn4:cfg/NAME",
"rtn8:cfg/NAME" or "fp8:cfg/NAME" is cfg/NAME with random weights (in the
check's dtype, f16 or bf16) whose projections are quantized here by the rule
of weft-compile --weight-dtype int4 / int8 / fp8: the plan (compiled from a
checkpoint of headers only) gets the codes in the file beside it,
transformers runs them expanded (FP8: code * scale rounded to the model's
dtype, where the kernels keep the f32 product). "rtn4+rtn8:cfg/NAME"
quantizes the LM head too, by the rule after the + (--lm-head-dtype int8).

A check with "batch" (a list of prompt lengths) runs all its prompts at once
through `weft-run --prompts` (the scheduler: decode tokens of many
sequences and prefill chunks of several in one step, every decode bucket
up to the batch) and compares each sequence, by the rules above, with
transformers running that sequence alone.

    WEFT_RUN=DIR/weft-run python3 test/gpu/check_plans.py DIR
Prints one table row per run; exits non-zero on any mismatch.
"""
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch
import transformers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "test", "fixtures")
TOL = 1e-2
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def rel_err(a, b):
    return ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()


def hf_greedy(model, prompt, steps):
    """Greedy tokens with the KV cache, stopping at EOS as weft-run does
    (generate()'s min_new_tokens would mask EOS instead)."""
    eos = model.config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
    tokens = []
    with torch.no_grad():
        out = model(torch.tensor([prompt], device="cuda"), use_cache=True)
        while len(tokens) < steps:
            tokens.append(int(out.logits[0, -1].argmax()))
            if tokens[-1] in eos:
                break
            out = model(torch.tensor([[tokens[-1]]], device="cuda"),
                        past_key_values=out.past_key_values, use_cache=True)
    return tokens


def fixture_script():
    """test/Inputs/make_quantized_fixture.py: the quantizer and the
    safetensors writer."""
    sys.path.insert(0, os.path.join(ROOT, "test", "Inputs"))
    import make_quantized_fixture
    return make_quantized_fixture


def quantize_projections(model, kind, head_kind=None):
    """Quantizes every projection of `model` in place by the compile-time
    rule of `kind` ("rtn4", "rtn8", "fp8"; scales in the model's dtype), and
    its LM head by `head_kind`'s when given (--lm-head-dtype; a head tied
    to the embedding is untied first, as the compiler quantizes a copy of
    the table under the table's name and keeps the embedding 16-bit), and
    returns the tensors of the kernels' file (make_quantized_fixture's
    kernel_file, which test/Import/kernel_file.test holds to the
    compiler's own file)."""
    mq = fixture_script()
    dtype = "bf16" if model.dtype == torch.bfloat16 else "f16"
    tied = bool(head_kind and getattr(model.config, "tie_word_embeddings", False))
    if tied:
        table = model.get_input_embeddings().weight
        model.lm_head.weight = torch.nn.Parameter(table.detach().clone())
        model.config.tie_word_embeddings = False
    params = dict(model.named_parameters())
    weights = {name: p.detach().float().cpu().numpy() for name, p in params.items()
               if name.endswith("_proj.weight")}
    if head_kind:
        weights["model.embed_tokens.weight" if tied else "lm_head.weight"] = (
            params["lm_head.weight"].detach().float().cpu().numpy())
    tensors, values = mq.kernel_file(weights, kind, head_kind, dtype, tied)
    with torch.no_grad():
        for name, v in values.items():
            params[name].copy_(torch.from_numpy(v))
    return tensors


class Models:
    """Transformers models and their saved weights, built once per model,
    with an fp32 copy as the truth. The model in the checked dtype is never
    converted in place: `model.float()` then `.to(float16)` would also round
    the rotary `inv_freq` buffer to fp16, and every later reference would
    then drift from the true RoPE by an angle growing with the position (an
    earlier version of this script did that: long prompts after the first
    check of a model looked 10x worse than they are)."""

    def __init__(self, plans, scratch):
        self.plans, self.scratch, self.key, self.model, self.dir = plans, scratch, None, None, None

    def get(self, spec, dtype):
        if self.key == (spec, dtype):
            return self.model, self.dir
        key = (spec, dtype)
        self.model, self.exact = None, None
        torch.cuda.empty_cache()
        if self.dir and self.dir.startswith(self.scratch):
            shutil.rmtree(self.dir, ignore_errors=True)
        if spec.startswith("fixture:"):
            d = os.path.join(FIXTURES, spec.split(":", 1)[1])
            model = transformers.AutoModelForCausalLM.from_pretrained(
                d, dtype=dtype, attn_implementation="eager").cuda().eval()
        elif spec.startswith("quant:"):
            # A quantized checkpoint (weft-run reads it, through the file
            # the compiler repacked beside the plan) and its dequantized
            # twin, the same f16 weights, which transformers runs.
            d = os.path.join(self.plans, spec.split(":", 1)[1])
            model = transformers.AutoModelForCausalLM.from_pretrained(
                d + "-dequant", dtype=dtype, attn_implementation="eager").cuda().eval()
        else:
            # "rtn4:cfg/NAME" / "rtn8:cfg/NAME" / "fp8:cfg/NAME": random
            # weights as below, the projections quantized by the rule of
            # --weight-dtype int4 / int8 / fp8 (make_quantized_fixture, the
            # same as the compiler's): transformers runs them expanded, and
            # the codes are written as the file weft-compile would put
            # beside the plan (kernel_file).
            kind = head_kind = None
            if spec.startswith(("rtn", "fp8")):
                kind, spec = spec.split(":", 1)
                if "+" in kind:  # "rtn4+rtn8": the LM head's rule after the +
                    kind, head_kind = kind.split("+")
            cfg = transformers.AutoConfig.from_pretrained(os.path.join(self.plans, spec))
            torch.manual_seed(0)
            with torch.device("cuda"):
                model = transformers.AutoModelForCausalLM.from_config(
                    cfg, dtype=dtype, attn_implementation="eager").eval()
            with torch.no_grad():  # weights that give well separated logits
                for n, p in model.named_parameters():
                    if "norm" in n:
                        p.uniform_(0.5, 1.5)
                    elif p.dim() == 1:
                        p.normal_(0, 0.02)
                    else:
                        p.normal_(0, 1.0 / p.shape[-1] ** 0.5)
            if kind:
                self.kernel_file = quantize_projections(model, kind, head_kind)
            d = os.path.join(self.scratch, spec.replace("/", "_"))
            t0 = time.time()
            model.save_pretrained(d, max_shard_size="1000GB")
            print(f"    (saved {spec} in {time.time() - t0:.1f} s)", flush=True)
        self.key, self.model, self.dir = key, model, d
        self.exact = None
        return model, d

    def truth(self):
        """The same weights in fp32 (made on first use)."""
        if self.exact is None:
            self.exact = copy.deepcopy(self.model).float()
        return self.exact


def tie_gap(truth, seq, a, b):
    """|logit(a) - logit(b)| / max |logit| of the fp32 model after `seq`."""
    with torch.no_grad():
        l = truth(torch.tensor([seq], device="cuda")).logits[0, -1].float()
    return ((l[a] - l[b]).abs() / l.abs().max()).item()


def allreduce_path(stdout):
    """What weft-run said about its all-reduces ("-" when it said nothing)."""
    for line in stdout.splitlines():
        if line.startswith("all-reduce:"):
            return line.split(":", 1)[1].strip()
    return "-"


def weft_run(runner, plan, weights, prompt_args, steps, devices, dump, extra=()):
    """Runs weft-run on `plan`, dumping the logits to `dump`; `extra`: more
    weft-run flags (a check's "args")."""
    cmd = [runner, plan, "--weights", weights, *prompt_args, "--max-tokens", str(steps),
           "--dump-logits", dump, "--quiet", "--skip-header-checksums", *extra]
    if devices:
        cmd += ["--devices", devices]
    return subprocess.run(cmd, capture_output=True, text=True)


def run_weft(runner, plan, weights, prompt, steps, devices):
    with tempfile.NamedTemporaryFile(suffix=".f32") as dump:
        run = weft_run(runner, plan, weights, ["--prompt-ids", ",".join(map(str, prompt))],
                       steps, devices, dump.name)
        if run.returncode != 0:
            return None, None, run.stderr.strip()[:300]
        tokens = [int(t) for t in run.stdout.split("tokens:")[1].split("\n")[0].split()]
        logits = torch.frombuffer(bytearray(open(dump.name, "rb").read()), dtype=torch.float32)
        return tokens, logits, allreduce_path(run.stdout)


def run_weft_batch(runner, plan, weights, prompts, steps, devices, extra=()):
    with tempfile.NamedTemporaryFile(suffix=".f32") as dump, \
            tempfile.NamedTemporaryFile("w", suffix=".txt") as listing:
        listing.write("\n".join(",".join(map(str, p)) for p in prompts) + "\n")
        listing.flush()
        run = weft_run(runner, plan, weights, ["--prompts", listing.name], steps, devices,
                       dump.name, extra)
        if run.returncode != 0:
            return None, None, run.stderr.strip()[:300], ""
        tokens = {}
        for line in run.stdout.splitlines():
            if line.startswith("sequence ") and " tokens:" in line:
                head, rest = line.split(" tokens:", 1)
                tokens[int(head.split()[1])] = [int(t) for t in rest.split()]
        logits = torch.frombuffer(bytearray(open(dump.name, "rb").read()), dtype=torch.float32)
        logits = logits.view(len(prompts), -1)
        summary = [l for l in run.stdout.splitlines()
                   if l.startswith(("loaded", "throughput", "prefix cache"))]
        return ([tokens.get(i, []) for i in range(len(prompts))], logits,
                allreduce_path(run.stdout), " ".join(summary))


def judge(truth, prompt, tokens, ref, logits, exact, hf_err):
    """'ok', 'tie' or 'FAIL' for one sequence, with its error and agreement."""
    err = rel_err(logits, exact)
    agree = 0
    while agree < min(len(tokens), len(ref)) and tokens[agree] == ref[agree]:
        agree += 1
    close = err <= TOL or err <= 1.5 * hf_err
    verdict = "ok" if close and tokens == ref else "FAIL"
    gap = None
    if close and tokens != ref and agree < len(tokens) and agree < len(ref):
        gap = tie_gap(truth, prompt + ref[:agree], ref[agree], tokens[agree])
        if gap <= 2 * max(err, hf_err):
            verdict = "tie"
    return verdict, err, agree, gap


def check_batch(c, model, truth, weights, runner, plans, gpus):
    """One row per device mapping: every sequence of the batch against
    transformers running it alone."""
    dtype = DTYPES[c["dtype"]]
    vocab = model.config.vocab_size
    prompts = []
    # "shared": prompt i begins with the first shared[i] tokens of one base
    # prompt (prefix caching shares their KV blocks), then its own tokens.
    shared = c.get("shared", [0] * len(c["batch"]))
    base = torch.randint(3, vocab, (max(c["batch"]),),
                         generator=torch.Generator().manual_seed(len(c["name"]))).tolist()
    for i, n in enumerate(c["batch"]):
        g = torch.Generator().manual_seed(len(c["name"]) * 1000 + i)
        own = torch.randint(3, vocab, (n,), generator=g).tolist()
        k = min(shared[i], n)
        prompts.append(base[:k] + own[k:])
    same, refs = [], []
    with torch.no_grad():
        for p in prompts:
            same.append(model(torch.tensor([p], device="cuda")).logits[0, -1].float().cpu())
            refs.append(hf_greedy(model, p, c["steps"]))
        exact = [truth(torch.tensor([p], device="cuda")).logits[0, -1].float().cpu()
                 for p in prompts]
    hf_errs = [rel_err(a, b) for a, b in zip(same, exact)]
    ok_all = True
    mappings = [None] if c["devices"] == 1 else ["0,0"] + (["0,1"] if gpus >= 2 else [])
    for devices in mappings:
        where = "1" if devices in (None, "0,0") else "2"
        tokens, logits, path, summary = run_weft_batch(
            runner, os.path.join(plans, c["plan"]), weights, prompts, c["steps"], devices,
            c.get("args", []))
        if tokens is None:
            print(f"| {c['name']} | {where} | weft-run failed: {path} | | | | FAIL |", flush=True)
            ok_all = False
            continue
        counts, worst, worst_hf, gaps = {"ok": 0, "tie": 0, "FAIL": 0}, 0.0, max(hf_errs), []
        for i, p in enumerate(prompts):
            # The reference's own error on one sequence is one draw of the
            # dtype's rounding noise (in bf16 it ranges 1e-2 to 2e-2 across
            # a batch of the tiny fixtures); the noise level is the batch's
            # largest. A bug is an order of magnitude above it.
            verdict, err, agree, gap = judge(truth, p, tokens[i], refs[i], logits[i], exact[i],
                                             worst_hf)
            counts[verdict] += 1
            worst = max(worst, err)
            if gap is not None:
                gaps.append(gap)
            if verdict == "FAIL":
                print(f"    sequence {i} (prompt {len(p)}): err {err:.2e} (HF {hf_errs[i]:.2e}), "
                      f"agrees {agree}/"
                      f"{c['steps']}\n    weft {tokens[i]}\n    hf   {refs[i]}", flush=True)
        verdict = "FAIL" if counts["FAIL"] else "ok"
        ok_all &= verdict == "ok"
        shown = path if c["devices"] > 1 else "-"
        lens = c["batch"]
        ties = f", {counts['tie']} ties (gap <= {max(gaps):.1e})" if counts["tie"] else ""
        print(f"| {c['name']}, prompts {min(lens)}-{max(lens)}"
              f"{', shared prefixes' if 'shared' in c else ''} | {where} | {worst:.2e} | "
              f"{worst_hf:.2e} | {counts['ok']}/{len(prompts)} exact{ties} | {shown} | "
              f"{verdict} |", flush=True)
        print(f"    {summary}", flush=True)
    return ok_all, len(mappings)


def main():
    plans = sys.argv[1]
    runner = os.environ.get("WEFT_RUN", os.path.join(plans, "weft-run"))
    checks = [json.loads(l) for l in open(os.path.join(plans, "checks.jsonl")) if l.strip()]
    if os.environ.get("WEFT_CHECKS"):  # a regular expression over names and plans
        import re
        checks = [c for c in checks
                  if re.search(os.environ["WEFT_CHECKS"], c["name"] + " " + c["plan"])]
    gpus = torch.cuda.device_count()
    print(f"| check | GPUs | weft err | HF err | greedy | all-reduce | |")
    print(f"|---|---|---|---|---|---|---|")
    ok_all, rows = True, 0
    with tempfile.TemporaryDirectory(dir=os.environ.get("WEFT_SCRATCH")) as scratch:
        models = Models(plans, scratch)
        for c in checks:
            dtype = DTYPES[c["dtype"]]
            model, weights = models.get(c["model"], dtype)
            if c["model"].startswith(("rtn", "fp8:")):
                beside = os.path.join(plans, c["plan"][:-len(".weft")] + ".weights.safetensors")
                fixture_script().write_safetensors(beside, models.kernel_file)
            if "batch" in c:
                ok, n = check_batch(c, model, models.truth(), weights, runner, plans, gpus)
                ok_all &= ok
                rows += n
                continue
            vocab = model.config.vocab_size
            g = torch.Generator().manual_seed(len(c["name"]))
            prompt = torch.randint(3, vocab, (c["prompt"],), generator=g).tolist()
            with torch.no_grad():
                ids = torch.tensor([prompt], device="cuda")
                same = model(ids).logits[0, -1].float().cpu()
                exact = models.truth()(ids).logits[0, -1].float().cpu()
            ref = hf_greedy(model, prompt, c["steps"])
            hf_err = rel_err(same, exact)
            mappings = [None] if c["devices"] == 1 else ["0,0"] + (["0,1"] if gpus >= 2 else [])
            for devices in mappings:
                t0 = time.time()
                tokens, logits, path = run_weft(runner, os.path.join(plans, c["plan"]), weights,
                                                prompt, c["steps"], devices)
                where = "1" if devices in (None, "0,0") else "2"
                if tokens is None:
                    print(f"| {c['name']} | {where} | weft-run failed: {path} | | | | FAIL |",
                          flush=True)
                    ok_all = False
                    continue
                err = rel_err(logits, exact)
                agree = 0
                while agree < min(len(tokens), len(ref)) and tokens[agree] == ref[agree]:
                    agree += 1
                close = err <= TOL or err <= 1.5 * hf_err
                verdict = "ok" if close and tokens == ref else "FAIL"
                greedy = f"{agree}/{c['steps']}"
                if close and tokens != ref and agree < len(tokens):
                    # Where the sequences part, a tie within half precision
                    # is not a bug: the fp32 truth, after the common prefix,
                    # scores both tokens within the logits' measured error.
                    gap = tie_gap(models.truth(), prompt + ref[:agree], ref[agree],
                                  tokens[agree])
                    greedy += f" (gap {gap:.1e})"
                    if gap <= 2 * max(err, hf_err):
                        verdict = "tie"
                ok = verdict != "FAIL"
                ok_all &= ok
                rows += 1
                shown = path if c["devices"] > 1 else "-"
                print(f"| {c['name']} | {where} | {err:.2e} | {hf_err:.2e} | {greedy} "
                      f"| {shown} | {verdict} |", flush=True)
                if verdict == "FAIL":
                    print(f"    weft {tokens}\n    hf   {ref}", flush=True)
    print(f"{rows} runs, {'all ok' if ok_all else 'FAILURES'}")
    sys.exit(0 if ok_all else 1)


if __name__ == "__main__":
    main()
