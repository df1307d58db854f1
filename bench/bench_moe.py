"""Fused MoE benchmark (H200 / SM12x): b12x fused_moe vs a BF16 grouped peer, CUDA-graph timed.

Per (shape, mode, M): microseconds per call (median over graph replays; each captured graph
rotates through distinct random routings so successive calls touch different experts), the bytes
of the experts actually touched (FP4 values + block scales of every distinct routed expert,
averaged over the rotation), their GB/s and % of the streaming-read bandwidth measured in the
same run, and the speedup over the BF16 peer (torch._grouped_mm when available, else a
per-expert matmul loop; routing/sorting excluded from the peer's time).
JSON: $B12X_BENCH_OUT/moe-<gpu>-<date>.json (or bench/results/).
"""

import os
import sys
import time

import numpy as np

try:
    import torch
except ImportError:  # pragma: no cover
    print("bench_moe: torch not available; skipped")
    sys.exit(0)

from b12x.moe import fused_moe

import graph_timing  # noqa: E402

SHAPES = [  # (name, E, topk, H, I, activation)
    ("qwen3-30b-a3b", 128, 8, 2048, 768, "silu"),
    ("deepseek-tp4", 256, 8, 7168, 512, "silu"),
    ("minimax-swiglu-oai", 128, 4, 6144, 3072, "swigluoai_uninterleave"),
    ("qwen3.5-397b-tp4", 512, 10, 4096, 1024, "silu"),
]
# The GPU check gives each benchmark 75 s: the full M sweep runs for nvfp4, a subset for w4a16,
# and the JSON is rewritten after every row so a timeout still leaves numbers.
# Passes in priority order (each over every target shape): the targets' M values first, so a
# budget stop still leaves them for every shape; every M <= 8 row before the long M = 4096 ones:
# the w4a16 rows reuse the peer times of the nvfp4 pass, so they run in the same state as those
# (session 7's final run had Qwen3-30B w4a16 M = 8 right after Qwen3.5-TP4's M = 4096 row at
# 77.9 us, 72.9-73.6 us on the same routes in round 30's probes).
PASSES = [("nvfp4", [1, 2, 4, 8]), ("w4a16", [1, 8]), ("nvfp4", [4096]), ("w4a16", [4096]),
          ("nvfp4", [16, 64, 256, 1024])]
ROT = 8  # distinct routings per captured graph
BUDGET_S = float(os.environ.get("B12X_BENCH_BUDGET_S", "55"))
REPEAT = max(1, int(os.environ.get("B12X_MOE_BENCH_REPEAT", "1")))
REBUILD = int(os.environ.get("B12X_MOE_BENCH_REBUILD", "0"))


def read_bandwidth_gbs(dev):
    return graph_timing.read_bandwidth_gbs(dev)


# Diagnostics of the bench state (session 10): B12X_MOE_BENCH_WARM=k replays the graph k more
# times before timing, B12X_MOE_BENCH_REPLAYS=1 prints every timed replay (us per call).
WARM = int(os.environ.get("B12X_MOE_BENCH_WARM", "0"))
SHOW_REPLAYS = os.environ.get("B12X_MOE_BENCH_REPLAYS", "0") != "0"


def time_graph(fn, per_graph=ROT, reps=5, label=None):
    return graph_timing.time_graph_us(fn, per_graph, reps, warm_replays=WARM,
                                      show=label if SHOW_REPLAYS else None)


def timeline(fn, per_graph=ROT):
    graph_timing.timeline(fn, per_graph, strip="moe_decode_")


def routes(M, E, topk, dev, gen):
    logits = torch.rand(M, E, device=dev, generator=gen)
    w, ids = torch.topk(logits, topk, dim=1)
    return ids.to(torch.int32).contiguous(), (w / w.sum(1, keepdim=True)).float().contiguous()


def make_experts(mode, E, H, I, act, dev):
    gated = act != "relu2"
    rows = 2 * I if gated else I
    src = "modelopt_nvfp4"
    w1 = torch.randint(0, 256, (E, rows, H // 2), dtype=torch.uint8, device=dev)
    w2 = torch.randint(0, 256, (E, H, I // 2), dtype=torch.uint8, device=dev)
    pad = lambda x, m: (x + m - 1) // m * m  # noqa: E731
    s1 = torch.randint(0x28, 0x38, (E, pad(rows, 128), pad(H // 16, 4)), dtype=torch.uint8,
                       device=dev)
    s2 = torch.randint(0x28, 0x38, (E, pad(H, 128), pad(I // 16, 4)), dtype=torch.uint8,
                       device=dev)
    g = torch.full((E,), 1.0 / 64, device=dev)
    ag = torch.full((E,), 2688.0 / 4, device=dev)
    plan_w = fused_moe.plan_weights(quant_modes=mode, source_format=src, activation=act,
                                    params_dtype=torch.bfloat16, num_experts=E, hidden_size=H,
                                    intermediate_size=I, w13_layout="w31")
    ex = fused_moe.prepare_weights(plan=plan_w, w1_fp4=w1, w2_fp4=w2, w1_blockscale=s1,
                                   w2_blockscale=s2, w1_global_scale=g, w2_global_scale=g,
                                   a1_gscale=ag, a2_gscale=ag, params_dtype=torch.bfloat16)
    # Bytes per expert as streamed: FP4 values + UE4M3/16 scales of FC1 and FC2.
    per_expert = rows * H // 2 + rows * H // 16 + H * I // 2 + H * I // 16
    del w1, w2, s1, s2
    return plan_w, ex, per_expert


def peer_setup(E, H, I, act, dev):
    gated = act != "relu2"
    rows = 2 * I if gated else I
    w1 = (torch.randn(E, H, rows, device=dev) * 0.02).to(torch.bfloat16)  # [E, K, N]
    w2 = (torch.randn(E, I, H, device=dev) * 0.02).to(torch.bfloat16)
    return w1, w2


def peer_call(w1, w2, x, ids, wts, E, I, act, grouped):
    """BF16 peer: tokens pre-sorted by expert (routing excluded: done outside the timing)."""
    M, topk = ids.shape
    flat = ids.view(-1)
    order = torch.argsort(flat)
    counts = torch.bincount(flat, minlength=E)
    offs = torch.cumsum(counts, 0).to(torch.int32)
    tok = (order // topk)
    xs = x.index_select(0, tok)
    return (xs, offs, order, counts.cpu())


def peer_run(w1, w2, prep, x, wts, M, topk, I, act, grouped, out):
    xs, offs, order, counts = prep
    if grouped:
        h = torch._grouped_mm(xs, w1, offs=offs)
    else:
        parts, start = [], 0
        for e, c in enumerate(counts.tolist()):
            if c:
                parts.append(xs[start:start + c] @ w1[e])
            start += c
        h = torch.cat(parts)
    if act == "relu2":
        y = torch.relu(h).square()
    elif act == "swigluoai_uninterleave":
        g_, u = h[:, :I].clamp(max=7.0), h[:, I:].clamp(-7.0, 7.0)
        y = g_ * torch.sigmoid(1.702 * g_) * (u + 1)
    else:
        y = torch.nn.functional.silu(h[:, :I]) * h[:, I:]
    y = y.to(torch.bfloat16)
    if grouped:
        o = torch._grouped_mm(y, w2, offs=offs)
    else:
        parts, start = [], 0
        for e, c in enumerate(counts.tolist()):
            if c:
                parts.append(y[start:start + c] @ w2[e])
            start += c
        o = torch.cat(parts)
    o = o.float() * wts.view(-1)[order].unsqueeze(1)
    out.zero_()
    out.index_add_(0, order // topk, o)
    return out


def write_json(rows_out, gpu, bw):
    return graph_timing.write_json("moe", rows_out, gpu, bw)


def main():
    if not torch.cuda.is_available():
        print("bench_moe: no CUDA device; skipped")
        return
    dev = torch.device("cuda:0")
    gpu = torch.cuda.get_device_name(dev)
    t_start = time.time()
    bw = read_bandwidth_gbs(dev)
    print(f"gpu {gpu}  streaming read bandwidth {bw:.0f} GB/s", flush=True)
    gen = torch.Generator(device=dev)
    gen.manual_seed(1234)
    grouped_ok = hasattr(torch, "_grouped_mm")
    rows_out = []
    peer_cache = {}
    hdr = (f"{'shape':22s} {'mode':6s} {'M':>5s} {'us':>9s} {'touchedMB':>9s} {'GB/s':>7s} "
           f"{'%bw':>5s} {'peer_us':>9s} {'x_peer':>6s}")
    print(hdr, flush=True)
    # B12X_MOE_BENCH_PASSES=n: only the first n passes of the full run (bench-state probes).
    n_passes = int(os.environ.get("B12X_MOE_BENCH_PASSES", "0")) or len(PASSES)
    passes = [(p, sh) for p in PASSES[:n_passes] for sh in SHAPES]
    # B12X_MOE_BENCH_CASES="shape:mode:M,..." runs only those rows, without the peer or the
    # profile section (for Nsight Compute: ncu -k regex:moe_decode ... python3 bench/bench_moe.py);
    # with B12X_MOE_BENCH_TIMELINE=1 each row also prints the kernel timeline of one replay.
    only = [c.split(":") for c in os.environ.get("B12X_MOE_BENCH_CASES", "").split(",") if c]
    # With B12X_MOE_BENCH_FULL_ROUTES=1 the selected rows get the inputs and routes the full run
    # gives them: the full pass order is walked and the skipped rows still draw theirs from the
    # generator (selected rows outside the full run follow, as without it).
    selected = None
    if only and os.environ.get("B12X_MOE_BENCH_FULL_ROUTES", "0") != "0":
        selected = {(n, mo, int(m)) for n, mo, m in only}
        in_full = {(sh[0], mo, m) for (mo, ms), sh in passes for m in ms}
        only = [c for c in only if (c[0], c[1], int(c[2])) not in in_full]
    if only:  # one pass per (shape, mode), in first-seen order: the experts are built once
        groups = {}
        for n, mo, m in only:
            groups.setdefault((n, mo), []).append(int(m))
        extra = [((mo, ms), sh) for (n, mo), ms in groups.items() for sh in SHAPES if sh[0] == n]
        passes = passes + extra if selected is not None else extra
    if selected is not None:
        for n, mo, m in only:
            selected.add((n, mo, int(m)))
        only = sorted(selected)
    # B12X_MOE_BENCH_PREALLOC=1: every pass's experts are prepared before the first row (like a
    # serving engine loading its weights once), instead of per pass after the peer's weights.
    experts = {}
    if os.environ.get("B12X_MOE_BENCH_PREALLOC", "0") != "0":
        for (mode, ms), (name, E, topk, H, I, act) in passes:
            if (mode, name) not in experts and (
                    selected is None or any((name, mode, M) in selected for M in ms)):
                experts[(mode, name)] = make_experts(mode, E, H, I, act, dev)
    for (mode, ms), (name, E, topk, H, I, act) in passes:
        if time.time() - t_start > BUDGET_S:
            print("budget exhausted; stopping", flush=True)
            break
        if selected is not None and not any((name, mode, M) in selected for M in ms):
            for M in ms:  # the generator draws of the skipped rows
                for _ in range(ROT):
                    torch.randn(M, H, device=dev, generator=gen)
                for _ in range(ROT):
                    routes(M, E, topk, dev, gen)
            continue
        need_peer = not only and any((name, M) not in peer_cache for M in ms)
        peer = peer_setup(E, H, I, act, dev) if need_peer else (None, None)
        if True:
            plan_w, ex, per_expert = experts.get((mode, name)) or make_experts(
                mode, E, H, I, act, dev)
            for M in ms:
                if time.time() - t_start > BUDGET_S:
                    break
                if selected is not None and (name, mode, M) not in selected:
                    for _ in range(ROT):
                        torch.randn(M, H, device=dev, generator=gen)
                    for _ in range(ROT):
                        routes(M, E, topk, dev, gen)
                    continue
                caps = fused_moe.Caps(max_tokens=M, num_topk=topk, device=dev, weight_plan=plan_w,
                                      quant_mode=mode,
                                      swiglu_limit=7.0 if act != "situ" and act != "silu" else None)
                pl = fused_moe.plan(caps)
                scratch = torch.empty(pl.scratch_bytes, dtype=torch.uint8, device=dev)
                xs = [torch.randn(M, H, device=dev, generator=gen).to(torch.bfloat16)
                      for _ in range(ROT)]
                rts = [routes(M, E, topk, dev, gen) for _ in range(ROT)]
                out = torch.empty(M, H, dtype=torch.bfloat16, device=dev)
                binds = [fused_moe.bind(pl, scratch=scratch, a=xs[i], experts=ex,
                                        topk_weights=rts[i][1], topk_ids=rts[i][0], output=out)
                         for i in range(ROT)]
                us = time_graph(lambda i: fused_moe.run(binding=binds[i % ROT]),
                                label=f"{name} {mode} {M}")
                for r in range(REPEAT - 1):  # B12X_MOE_BENCH_REPEAT: the same row timed again
                    us_r = time_graph(lambda i: fused_moe.run(binding=binds[i % ROT]),
                                      label=f"{name} {mode} {M} again {r + 1}")
                    print(f"  repeat {name} {mode} {M}: {us_r:.1f}", flush=True)
                # B12X_MOE_BENCH_REBUILD=n: the same row with its experts prepared n more times
                # (the earlier copies kept, so each lands at other addresses).
                kept = []
                for r in range(REBUILD):
                    kept.append(make_experts(mode, E, H, I, act, dev)[1])
                    rb = [fused_moe.bind(pl, scratch=scratch, a=xs[i], experts=kept[-1],
                                         topk_weights=rts[i][1], topk_ids=rts[i][0], output=out)
                          for i in range(ROT)]
                    us_r = time_graph(lambda i: fused_moe.run(binding=rb[i % ROT]),
                                      label=f"{name} {mode} {M} rebuilt {r + 1}")
                    print(f"  rebuilt {name} {mode} {M}: {us_r:.1f}", flush=True)
                    del rb
                del kept
                uniq = np.mean([torch.unique(r[0]).numel() for r in rts])
                touched = uniq * per_expert
                gbs = touched / (us * 1e-6) / 1e9
                # peer
                peer_us, peer_name = peer_cache.get((name, M), (float("nan"), "none"))
                w1p, w2p = peer
                if (name, M) not in peer_cache and need_peer:
                    preps = [peer_call(w1p, w2p, xs[i], rts[i][0], rts[i][1], E, I, act,
                                       grouped_ok) for i in range(ROT)]
                    pout = torch.empty(M, H, dtype=torch.float32, device=dev)
                for use_grouped in ([] if (name, M) in peer_cache or not need_peer else
                                    ([True, False] if grouped_ok else [False])):
                    try:
                        peer_us = time_graph(
                            lambda i: peer_run(w1p, w2p, preps[i % ROT], xs[i % ROT],
                                               rts[i % ROT][1], M, topk, I, act, use_grouped,
                                               pout),
                            per_graph=ROT if use_grouped else 1, reps=9 if use_grouped else 3)
                        peer_name = "torch._grouped_mm" if use_grouped else "per-expert matmul"
                        peer_cache[(name, M)] = (peer_us, peer_name)
                        break
                    except Exception as e:  # pragma: no cover - depends on torch build
                        print(f"  peer ({'grouped' if use_grouped else 'loop'}) failed: "
                              f"{type(e).__name__}: {str(e)[:200]}", flush=True)
                        grouped_ok = grouped_ok and not use_grouped
                ratio = peer_us / us if us > 0 else float("nan")
                print(f"{name:22s} {mode:6s} {M:5d} {us:9.1f} {touched / 1e6:9.1f} {gbs:7.0f} "
                      f"{100 * gbs / bw:5.1f} {peer_us:9.1f} {ratio:6.2f}", flush=True)
                rows_out.append({"shape": name, "E": E, "topk": topk, "H": H, "I": I,
                                 "activation": act, "mode": mode, "M": M,
                                 "execution": pl.execution.execution, "us": us,
                                 "touched_bytes": touched, "gbs": gbs,
                                 "pct_read_bw": 100 * gbs / bw, "peer": peer_name,
                                 "peer_us": peer_us,
                                 "speedup_vs_peer": ratio})
                if not only:  # a probe run never overwrites the full table
                    write_json(rows_out, gpu, bw)
                elif os.environ.get("B12X_MOE_BENCH_TIMELINE", "0") != "0":
                    timeline(lambda i: fused_moe.run(binding=binds[i % ROT]))
                del binds, scratch, xs, rts, out
            del ex
            torch.cuda.empty_cache()
        del peer
        torch.cuda.empty_cache()
    if only:
        return
    path = write_json(rows_out, gpu, bw)
    print(f"wrote {path} in {time.time() - t_start:.0f}s", flush=True)
    if os.environ.get("B12X_MOE_BENCH_PROFILE", "1") != "0" and not only:
        try:
            profile_kernels(dev, gen)
        except Exception as e:  # pragma: no cover - diagnostics only, never fail the bench
            print(f"profile failed: {type(e).__name__}: {str(e)[:200]}", flush=True)


def profile_kernels(dev, gen):
    """Per-kernel device time of decode calls (torch.profiler / CUPTI), to see which launch of
    the chain dominates. With programmatic dependent launch a kernel's span starts when it is
    launched early, so it includes its wait for the predecessor: read the spans as overlapping."""
    try:
        from torch.profiler import ProfilerActivity, profile
    except ImportError:  # pragma: no cover
        return
    cases = [(sh, mode, M) for sh in SHAPES[:2] for mode in ("nvfp4", "w4a16") for M in (1, 8)]
    for (name, E, topk, H, I, act), mode, M in cases:
        plan_w, ex, _ = make_experts(mode, E, H, I, act, dev)
        caps = fused_moe.Caps(max_tokens=M, num_topk=topk, device=dev, weight_plan=plan_w,
                              quant_mode=mode)
        pl = fused_moe.plan(caps)
        scratch = torch.empty(pl.scratch_bytes, dtype=torch.uint8, device=dev)
        x = torch.randn(M, H, device=dev, generator=gen).to(torch.bfloat16)
        ids, wts = routes(M, E, topk, dev, gen)
        out = torch.empty(M, H, dtype=torch.bfloat16, device=dev)
        b = fused_moe.bind(pl, scratch=scratch, a=x, experts=ex, topk_weights=wts, topk_ids=ids,
                           output=out)
        for _ in range(3):
            fused_moe.run(binding=b)
        torch.cuda.synchronize()
        reps = 20
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                fused_moe.run(binding=b)
            torch.cuda.synchronize()
        spans = {}
        for ev in prof.events():
            if ev.device_type is not None and "CUDA" in str(ev.device_type):
                k = ev.name.split("(")[0].split("<")[0].split("::")[-1][:40]
                spans.setdefault(k, []).append(ev.time_range.elapsed_us())
        txt = "  ".join(f"{k}={np.median(v):.1f}us" for k, v in spans.items())
        print(f"profile {name:20s} {mode:6s} M={M:<3d} {txt}", flush=True)
        del ex, scratch
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
