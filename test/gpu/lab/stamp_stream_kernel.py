#!/usr/bin/env python3
"""Where a step's time goes inside the batch-1 decode stream kernel.

    python3 test/gpu/lab/stamp_stream_kernel.py DIR            (here)
    weft-compile ... --decode-stream --kernel-library DIR -o P.weft
    weft-run P.weft --random-weights --bench decode_b1 --bench-steps 60 > LOG   (there)
    python3 test/gpu/lab/stamp_stream_kernel.py --read LOG "fp16, context 128:"

The first form writes DIR/weft/decode_stream.cuh: a copy of the library's
kernel in which thread 0 of every block takes the global timer at 29 events
of the middle layer (each projection: its input ready, input loaded, first
stage landed, stages done, columns written, released; attention: the QKV
counter seen, the loop done, the partial written, the arrival counted, the
combine released) and, in the 41st launch of the process, prints them as
one "TL block t0 .. t28" line. Compiling a plan with --kernel-library DIR
takes it in place of the embedded one (timing only: the stamps cost about
1%). --read prints the events of such a log as the table that
test/gpu/plot_stream_timeline.py draws (first, median and last block, us
from the first block's QKV input), under the given heading.

The copy is made by replacing lines of the kernel; when the kernel changes,
the replacement that no longer matches is named and nothing is written.
"""
import os
import statistics
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
KERNEL = os.path.join(ROOT, "targets", "CUDA", "kernels", "weft", "decode_stream.cuh")
EVENTS = 29
PHASES = ["QKV", "O", "gate/up", "down"]
STEPS = ["input ready", "input loaded", "first stage landed", "stages done", "columns written",
         "released"]
ATTENTION = ["attn: QKV seen", "attn: loop done", "attn: partial written", "attn: arrival counted",
             "attn: combined + released (last split)"]


def stamped(src):
    """The kernel source with the stamps, or exit naming the line that moved."""
    def rep(old, new, count=1):
        nonlocal src
        if src.count(old) != count:
            sys.exit(f"stamp_stream_kernel.py: {KERNEL} changed: expected {count} of:\n{old}")
        src = src.replace(old, new)

    rep("namespace weft::kernels::stream {\n", f"""namespace weft::kernels::stream {{
__shared__ unsigned long long tlStamps[{EVENTS}];
__device__ unsigned tlCounter;
__device__ __forceinline__ void tl(int ev) {{
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  tlStamps[ev] = t;
}}
#define TLP(layer, phase, k) do {{ if (threadIdx.x == 0 && (layer) == C::LAYERS / 2) \\
  tl(((phase) == 0 ? 0 : (phase) - 1) * 6 + (k)); }} while (0)
""")
    # consume (16-bit weights)
    rep("""  waitPhaseInput(s, layer, phase);
  const int cols""", """  waitPhaseInput(s, layer, phase);
  TLP(layer, phase, 0);
  const int cols""")
    rep("""  loadInput<C, P::K>(x, norm != nullptr, gamma, xf, r.red);
  const int base = w * (P::K / C::CW) + lane * 8;
  for (int c = c0; c < c1; ++c, ++r.it) {
    const int st = r.it % C::STAGES;
    mbarWait(&r.full[st], (r.it / C::STAGES) & 1);""", """  loadInput<C, P::K>(x, norm != nullptr, gamma, xf, r.red);
  TLP(layer, phase, 1);
  const int base = w * (P::K / C::CW) + lane * 8;
  for (int c = c0; c < c1; ++c, ++r.it) {
    const int st = r.it % C::STAGES;
    mbarWait(&r.full[st], (r.it / C::STAGES) & 1);
    if (c == c0) TLP(layer, phase, 2);""")
    rep("""      mbarArrive(&r.empty[st]);
  }
  consumerBarrier<C>();
  // The block's columns""", """      mbarArrive(&r.empty[st]);
  }
  TLP(layer, phase, 3);
  consumerBarrier<C>();
  // The block's columns""")
    rep("""  consumerBarrier<C>();
  if (threadIdx.x == 0)
    addRelease(doneCounter(s, layer, phase));
}""", """  consumerBarrier<C>();
  TLP(layer, phase, 4);
  if (threadIdx.x == 0)
    addRelease(doneCounter(s, layer, phase));
  TLP(layer, phase, 5);
}""", 2)
    # consumeCodes (4-bit codes)
    rep("""  waitPhaseInput(s, layer, phase);
  int u0, u1;""", """  waitPhaseInput(s, layer, phase);
  TLP(layer, phase, 0);
  int u0, u1;""")
    rep("""    consumerBarrier<C>();
  }
  for (int u = u0; u < u1; ++u, ++r.units) {""", """    consumerBarrier<C>();
  }
  TLP(layer, phase, 1);
  for (int u = u0; u < u1; ++u, ++r.units) {""")
    rep("""      mbarWait(&r.full[st], (r.it / C::STAGES) & 1);
      const unsigned char *stage""", """      mbarWait(&r.full[st], (r.it / C::STAGES) & 1);
      if (u == u0 && kp == 0) TLP(layer, phase, 2);
      const unsigned char *stage""")
    rep("""      }
    }
  }
  consumerBarrier<C>();
  for (int q = threadIdx.x; q < cols; q += C::CW * 32) {
    const int k = q / 16, j = q % 16;""", """      }
    }
  }
  TLP(layer, phase, 3);
  consumerBarrier<C>();
  for (int q = threadIdx.x; q < cols; q += C::CW * 32) {
    const int k = q / 16, j = q % 16;""")
    # attend
    rep("""    waitCount(doneCounter(counters, layer, 0), (unsigned)C::GRID);
  consumerBarrier<C>();
  t *act""", """    waitCount(doneCounter(counters, layer, 0), (unsigned)C::GRID);
  consumerBarrier<C>();
  const bool TLL = threadIdx.x == 0 && layer == C::LAYERS / 2;
  if (TLL) tl(24);
  t *act""")
    rep("""  float *wacc = merge, *wm""", """  if (TLL) tl(25);
  float *wacc = merge, *wm""")
    rep("""  consumerBarrier<C>();
  if (threadIdx.x == 0) {
    const unsigned arrived =""", """  consumerBarrier<C>();
  if (TLL) tl(26);
  if (threadIdx.x == 0) {
    const unsigned arrived =""")
    rep("""  consumerBarrier<C>(); // red is reused
  if (!last)""", """  consumerBarrier<C>(); // red is reused
  if (TLL) tl(27);
  if (!last)""")
    rep("""    addRelease(doneCounter(counters, layer, 1));
}""", """    addRelease(doneCounter(counters, layer, 1));
  if (TLL) tl(28);
}""")
    # the kernel body: clear at the start, print at the end of launch 40
    rep("""  wf_grid_dependency_wait();
  const int pos""", f"""  wf_grid_dependency_wait();
  const unsigned tlLaunch = *(volatile unsigned *)&tlCounter;
  if (threadIdx.x < {EVENTS}) tlStamps[threadIdx.x] = 0;
  const int pos""")
    fmt = " ".join(["%llu"] * EVENTS)
    args = ", ".join(f"tlStamps[{i}]" for i in range(EVENTS))
    rep("""      next[col] = wf_to<t>(wf_round<t>(va) + res);
    });
  }
}""", f"""      next[col] = wf_to<t>(wf_round<t>(va) + res);
    }});
  }}
  if (threadIdx.x == 0 && tlLaunch == 40)
    printf("TL %d {fmt}\\n", (int)blockIdx.x, {args});
  if (threadIdx.x == 0 && blockIdx.x == 0)
    atomicAdd(&tlCounter, 1u);
}}""")
    return src


def read(log, heading):
    names = {p * 6 + k: f"{PHASES[p]} {s}" for p in range(4) for k, s in enumerate(STEPS)}
    names.update({24 + i: s for i, s in enumerate(ATTENTION)})
    order = list(range(0, 6)) + list(range(24, 29)) + list(range(6, 24))
    rows = []
    with open(log) as f:
        for line in f:
            if line.startswith("TL "):
                rows.append([int(v) for v in line.split()[2:]])
    if not rows or any(len(r) != EVENTS for r in rows):
        sys.exit(f"stamp_stream_kernel.py: {log}: no complete TL lines (a stamped plan, 41 launches?)")
    t0 = min(r[0] for r in rows if r[0])
    print(heading)
    for e in order:
        v = sorted((r[e] - t0) / 1e3 for r in rows if r[e])
        if v:
            print(f"| {names[e]} | {v[0]:.2f} | {statistics.median(v):.2f} | {v[-1]:.2f} | {len(v)} |")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--read":
        read(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 2 and not sys.argv[1].startswith("-"):
        with open(KERNEL) as f:
            src = stamped(f.read())
        os.makedirs(os.path.join(sys.argv[1], "weft"), exist_ok=True)
        with open(os.path.join(sys.argv[1], "weft", "decode_stream.cuh"), "w") as f:
            f.write(src)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
