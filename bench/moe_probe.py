"""A/B probe of fused-MoE decode launch variants in one process (H200 rounds; bench_moe.py's
shapes and expert construction).

B12X_PROBE_CASES="shape:mode:M,..." (shape as in bench_moe.SHAPES, a prefix is enough),
B12X_PROBE_VARIANTS="name:ENV=VAL+ENV=VAL;name:..." (knobs read by `plan`; the base variant, no
overrides, always runs first; a case "shape:mode:M:name/name" runs only those variants, a
fifth field "tl" adds the base variant's per-kernel median durations over one replay, "tla"
every variant's; "starts" is each kernel's start after the previous kernel's end, negative where
it became resident during it). Per row the experts are built once per (shape, mode), the inputs
and routes drawn once, one graph of 8 calls (rotating routes) captured per variant, and the
graphs' timed replays interleaved variant by variant (B12X_PROBE_REPS rounds, median). Prints
us, % of the read bandwidth on the touched bytes, ratio to the base, whether the output bits
equal the base's, and the plan signature where it differs from the base's. B12X_PROBE_TIMELINE=1
adds the base variant's per-kernel median durations over one replay (torch.profiler), =2 every
variant's.
"""

import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import b12x  # noqa: E402
import bench_moe as bm  # noqa: E402
import graph_timing as gt  # noqa: E402
from b12x.moe import fused_moe  # noqa: E402


def parse_variants(text):
    out = [("def", {})]
    for item in [v for v in text.split(";") if v.strip()]:
        name, _, envs = item.partition(":")
        kv = dict(e.split("=", 1) for e in envs.split("+") if e)
        out.append((name.strip(), kv))
    return out


def kernel_medians(g):
    """Per kernel: the median span (it includes a programmatic launch's early wait) and, after
    "ends", the median time from the previous kernel's end to its end (the chain's steps)."""
    spans, steps, starts = {}, {}, {}
    prev_end = None
    for e in sorted(gt.kernel_events(g), key=lambda e: e["ts"]):
        n = e["name"].split("(")[0].split("<")[0].split("::")[-1].replace("moe_decode_", "")
        spans.setdefault(n[:12], []).append(e["dur"])
        end = e["ts"] + e["dur"]
        if prev_end is not None:
            steps.setdefault(n[:12], []).append(end - prev_end)
            starts.setdefault(n[:12], []).append(e["ts"] - prev_end)
        prev_end = end
    return (" ".join(f"{k}={np.median(v):.1f}" for k, v in spans.items()) + " | ends "
            + " ".join(f"{k}=+{np.median(v):.1f}" for k, v in steps.items()) + " | starts "
            + " ".join(f"{k}={np.median(v):+.1f}" for k, v in starts.items()))


def main():
    dev = torch.device("cuda:0")
    t0 = time.time()
    bw = gt.read_bandwidth_gbs(dev)
    reps = int(os.environ.get("B12X_PROBE_REPS", "7"))
    show_tl = int(os.environ.get("B12X_PROBE_TIMELINE", "0"))
    variants = parse_variants(os.environ.get("B12X_PROBE_VARIANTS", ""))
    knob_names = {k for _, kv in variants for k in kv}
    cases = [c.split(":") for c in os.environ.get("B12X_PROBE_CASES", "").split(",") if c]
    print(f"probe: read bandwidth {bw:.0f} GB/s, variants "
          + "; ".join(f"{n}={kv}" for n, kv in variants), flush=True)
    gen = torch.Generator(device=dev)
    gen.manual_seed(1234)
    built = {}
    budget = float(os.environ.get("B12X_PROBE_BUDGET_S", "42"))
    for case in cases:
        if time.time() - t0 > budget:
            print(f"probe: budget of {budget:.0f} s spent, skipping {':'.join(case)}", flush=True)
            continue
        shape, mode, m_text = case[:3]
        pick = case[3].split("/") if len(case) > 3 and case[3] else None
        tl_case = len(case) > 4 and case[4] in ("tl", "tla")
        tl_all = len(case) > 4 and case[4] == "tla"
        M = int(m_text)
        sh = next(s for s in bm.SHAPES if s[0].startswith(shape))
        name, E, topk, H, I, act = sh
        if (name, mode) not in built:
            built.clear()
            torch.cuda.empty_cache()
            built[(name, mode)] = bm.make_experts(mode, E, H, I, act, dev)
        plan_w, ex, per_expert = built[(name, mode)]
        xs = [torch.randn(M, H, device=dev, generator=gen).to(torch.bfloat16)
              for _ in range(bm.ROT)]
        rts = [bm.routes(M, E, topk, dev, gen) for _ in range(bm.ROT)]
        touched = np.mean([torch.unique(r[0]).numel() for r in rts]) * per_expert
        runs = []
        for vname, kv in variants:
            if pick is not None and vname != "def" and vname not in pick:
                continue
            for k in knob_names:
                os.environ.pop(k, None)
            os.environ.update(kv)
            try:
                b12x.clear_resolved_kernels()
            except Exception:  # pragma: no cover - builds without the integration area
                pass
            caps = fused_moe.Caps(max_tokens=M, num_topk=topk, device=dev, weight_plan=plan_w,
                                  quant_mode=mode,
                                  swiglu_limit=7.0 if act != "silu" else None)
            pl = fused_moe.plan(caps)
            try:
                sig = " | ".join(r["signature"] for r in b12x.resolved_kernels())
            except Exception:  # pragma: no cover
                sig = "?"
            scratch = torch.empty(pl.scratch_bytes, dtype=torch.uint8, device=dev)
            out = torch.empty(M, H, dtype=torch.bfloat16, device=dev)
            binds = [fused_moe.bind(pl, scratch=scratch, a=xs[i], experts=ex,
                                    topk_weights=rts[i][1], topk_ids=rts[i][0], output=out)
                     for i in range(bm.ROT)]
            g = gt.capture_graph(lambda i: fused_moe.run(binding=binds[i % bm.ROT]), bm.ROT)
            runs.append([vname, pl, scratch, out, binds, g, sig, []])
        for k in knob_names:
            os.environ.pop(k, None)
        for _ in range(reps):
            for r in runs:
                r[7].append(gt.replay_us(r[5], bm.ROT))
        base_out = None
        base_us = None
        base_sig = None
        for vname, pl, scratch, out, binds, g, sig, ts in runs:
            out.fill_(float("nan"))
            fused_moe.run(binding=binds[0])
            torch.cuda.synchronize()
            res = out.clone()
            us = gt.median(ts)
            if base_out is None:
                base_out, base_us, base_sig = res, us, sig
            same = "bits=" if torch.equal(res, base_out) else (
                "bits!= maxdiff %.3g" % (res.float() - base_out.float()).abs().max().item())
            pct = 100 * touched / (us * 1e-6) / 1e9 / bw
            line = (f"{name[:14]:14s} {mode:6s} M={M:<2d} {vname:10s} {us:8.1f} us {pct:5.1f}% "
                    f"x{us / base_us:.3f} {same}")
            if sig != base_sig or vname == "def":
                line += f"  [{sig}]"
            if show_tl > 1 or tl_all or ((show_tl == 1 or tl_case) and vname == "def"):
                line += "\n    tl " + kernel_medians(g)
            print(line, flush=True)
        del runs
    print(f"probe done in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
