#!/usr/bin/env python3
"""Checks the plan's JSON view (weft-inspect --json, runtime/plan/PlanJson.cpp)
against the schema (runtime/plan/plan.fbs): every field of every table
appears in the view of plans that use every table (one device, tensor
parallel, a pipeline), and the view shows nothing the schema lacks but the
few keys it derives (listed below with their reasons). A field added to the
schema and not to the view, or a key renamed on one side only, fails here.

    check_plan_json.py WEFT_COMPILE WEFT_INSPECT FIXTURE_DIR PLAN_FBS KERNEL_CACHE
"""
import json
import os
import re
import subprocess
import sys
import tempfile

# Schema fields the view shows under another name, and why.
RENAMED = {
    "hash": "blake2b_256",  # Seal.hash: the algorithm is the name a reader needs
}
# Keys the view adds, derived from the fields, and why.
DERIVED = {
    "fnv1a64",  # a checksum of each cubin/PTX instead of its bytes
    "input",    # Arg of kind input: the InputKind name of `index`
    "op_type",  # Step: which of launch / gemm / copy / all_reduce the union holds
}


def schema_fields(path):
    text = re.sub(r"//[^\n]*", "", open(path, encoding="utf-8").read())
    fields = {}
    for table in re.finditer(r"\btable\s+(\w+)\s*\{([^}]*)\}", text):
        for field in re.finditer(r"(\w+)\s*:", table.group(2)):
            fields.setdefault(field.group(1), table.group(1))
    return fields


def json_keys(value, out):
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(k)
            json_keys(v, out)
    elif isinstance(value, list):
        for v in value:
            json_keys(v, out)
    return out


def main():
    compile_, inspect, fixture, fbs, cache = sys.argv[1:6]
    layouts = {
        "one": ["--topology", "h200"],
        "tp": ["--topology", "2xh200:nvlink", "--stages", "0+1"],
        "pipeline": ["--topology", "2xh200:nvlink", "--stages", "0:1,1"],
    }
    keys = set()
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in layouts.items():
            plan = os.path.join(tmp, name + ".weft")
            subprocess.run([compile_, "--model", fixture, "--max-batch", "2", "--prefill-chunks",
                            "8", "--kernel-cache", cache, *args, "-o", plan],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            out = subprocess.run([inspect, plan, "--json"], check=True, capture_output=True,
                                 text=True).stdout
            json_keys(json.loads(out), keys)
    fields = schema_fields(fbs)
    problems = []
    for field, table in sorted(fields.items()):
        if RENAMED.get(field, field) not in keys:
            problems.append(f"{table}.{field} (plan.fbs) is not in the JSON view")
    for key in sorted(keys):
        if key not in fields and key not in RENAMED.values() and key not in DERIVED:
            problems.append(f"JSON key '{key}' is no field of plan.fbs (nor a listed derived key)")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"plan JSON view: all {len(fields)} schema fields shown, {len(DERIVED)} derived keys")
    return 0


if __name__ == "__main__":
    sys.exit(main())
