"""Paged-attention benchmark (H200 / SM12x): b12x decode and extend vs torch SDPA on the same
data laid out contiguously. Times CUDA-graph replays over rotating inputs (past L2), measures the
streaming read bandwidth in the same run, prints a table and writes
$B12X_BENCH_OUT/attention-<gpu>-<date>.json (bench_common.h's fields).

    B12X_LIBRARY=build/libb12x.so PYTHONPATH=python python3 bench/bench_attention.py [--quick]

B12X_ATTN_BENCH_CASES (optional) replaces the case list: ';'-separated entries
'd:B:ctx:kv[:tile[:splits[:HQxHKVxDxPAGE]]]' (decode, default 32x8x128x64; tile '' = default),
'p:B:ctx[:HQxHKVxDxPAGE]' (the BF16 and FP8 decode rows of a shape with their timed replays
interleaved, as the default list times them) or 'e:B:new:prefix:kv[:tile]' (extend), e.g.
'd:8:8192:fp8;d:8:8192:fp8:hcvt;d:1:8192:bf16::32;p:8:8192'.
A tile field holding '=' sets environment knobs around plan() instead, ','-separated, e.g.
'e:8:2048:0:bf16:B12X_ATTN_GRID=tiles,B12X_ATTN_RESCALE_SLACK=0'. B12X_ATTN_BENCH_TIMELINE=1
prints each decode row's kernel timeline (one graph replay of 6 calls);
B12X_ATTN_BENCH_ROTATIONS=n replaces the input rotation count (1: L2-resident inputs).
SDPA peers are measured on rows without a tile or split override.

Decode rows plan with ``paged.Caps``' defaults, i.e. ``kv_prefix_stable=True`` as on vLLM's call
path (early K/V copies before the PDL wait, kernel names ending in ``_early``); a tile field
``B12X_ATTN_EARLY_KV=0`` times the plan without them. B12X_ATTN_BENCH_CLOCKS=1 samples the GPU's
SM clock, power and temperature (nvidia-smi, every 10 ms) and prints them per row for the span of
the row's b12x timing (B12X_ATTN_BENCH_REPS=n: n graph replays per timing instead of 7).
"""

import datetime
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from b12x.attention import paged

import graph_timing

DEV = "cuda"
L2_BYTES = torch.cuda.get_device_properties(0).L2_cache_size if torch.cuda.is_available() else 0
T0 = time.time()
BUDGET_S = float(os.environ.get("B12X_BENCH_BUDGET_S", "55"))
REPS = int(os.environ.get("B12X_ATTN_BENCH_REPS", "7") or 7)


def fused_sdpa_only():
    """SDPA restricted to the fused backends (never the math fallback, which would expand GQA
    heads and materialise the scores): a shape they cannot serve raises instead."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                        SDPBackend.EFFICIENT_ATTENTION])


def capture_graph(launch, n_rot, per_graph=10):
    """A CUDA graph of `per_graph` launches cycling through `n_rot` input sets (3 eager warm-up
    launches first; replayed once)."""
    return graph_timing.capture_graph(lambda i: launch(i % n_rot), per_graph, warmup=3)


def replay_us(g, per_graph=10):
    return graph_timing.replay_us(g, per_graph)


median = graph_timing.median
LAST_TIMING = graph_timing.LAST_TIMING  # wall-clock span of the last time_graph_us's replays


def time_graph_us(launch, n_rot, per_graph=10, reps=None):
    """Median microseconds per launch over graph replays of `per_graph` launches cycling through
    `n_rot` input sets."""
    return graph_timing.time_graph_us(lambda i: launch(i % n_rot), per_graph, reps or REPS,
                                      warmup=3)


def read_bandwidth_gbs():
    return graph_timing.read_bandwidth_gbs(DEV)


def rotations(bytes_per_set):
    # B12X_ATTN_BENCH_ROTATIONS=n: n input sets instead (1: a set below the L2's size stays
    # resident, which separates the kernel's execution time from its DRAM stream)
    forced = int(os.environ.get("B12X_ATTN_BENCH_ROTATIONS", "0") or 0)
    if forced > 0:
        return forced
    return max(1, min(48, math.ceil(3 * L2_BYTES / max(bytes_per_set, 1))))


def plan_with(caps, tile_env, tile):
    """paged.plan(caps) with `tile_env`=tile set, or with the knobs of a 'K=V,K2=V2' tile."""
    env = {}
    if tile and "=" in tile:
        env = dict(kv.split("=", 1) for kv in tile.split(","))
    elif tile:
        env = {tile_env: tile}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return paged.plan(caps)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def make_paged(B, L, hkv, D, page, kv_dtype, n_rot, qlen=1, hq=None):
    """n_rot independent page sets (random page order) of B requests x L tokens."""
    npg = (L + page - 1) // page
    pool = n_rot * B * npg
    if kv_dtype == torch.float8_e4m3fn:
        cache = torch.randint(0, 0x76, (pool, 2, page, hkv, D), dtype=torch.uint8,
                              device=DEV).view(torch.float8_e4m3fn)
    else:
        cache = torch.randn(pool, 2, page, hkv, D, dtype=kv_dtype, device=DEV)
    perm = torch.randperm(pool, device=DEV).to(torch.int32)
    tables = [perm[r * B * npg:(r + 1) * B * npg].view(B, npg).contiguous() for r in range(n_rot)]
    return cache, tables


def prep_decode(B, L, hq, hkv, D, page, kv_name, tile=None, splits=None, grid=None):
    """Inputs, plan and bindings of one decode row."""
    kv_dtype = torch.float8_e4m3fn if kv_name == "fp8" else torch.bfloat16
    eb = 1 if kv_name == "fp8" else 2
    kv_bytes = B * L * hkv * 2 * D * eb
    n_rot = rotations(kv_bytes)
    cache, tables = make_paged(B, L, hkv, D, page, kv_dtype, n_rot)
    k_cache, v_cache = cache[:, 0], cache[:, 1]
    q = [torch.randn(B, hq, D, dtype=torch.bfloat16, device=DEV) for _ in range(n_rot)]
    out = torch.empty(B, hq, D, dtype=torch.bfloat16, device=DEV)
    seq = torch.full((B,), L, dtype=torch.int32, device=DEV)
    cu = torch.arange(B + 1, dtype=torch.int32, device=DEV)
    kd = torch.full((B,), 0.05, device=DEV) if kv_name == "fp8" else None
    npg = tables[0].shape[1]
    caps = paged.Caps(device=0, mode="decode", dtype=torch.bfloat16, kv_dtype=kv_dtype,
                      num_q_heads=hq, num_kv_heads=hkv, head_dim_qk=D, head_dim_vo=D,
                      page_size=page, max_total_q=B, max_batch=B, max_page_table_width=npg,
                      max_splits=splits or 0, use_cuda_graph=True)
    knobs = tile
    if grid:  # both knobs as 'K=V' pairs
        named = tile if not tile or "=" in tile else f"B12X_ATTN_DECODE_TILE={tile}"
        knobs = ",".join(x for x in (named, f"B12X_ATTN_GRID={grid}") if x)
    pl = plan_with(caps, "B12X_ATTN_DECODE_TILE", knobs)
    scratch = torch.empty(pl.layout.nbytes, dtype=torch.uint8, device=DEV)
    binds = [pl.bind(scratch, q[r], k_cache, v_cache, out, tables[r], seq, cu, k_descale=kd,
                     v_descale=kd, return_lse=False, num_splits=splits) for r in range(n_rot)]
    flops = 2.0 * B * hq * L * 2 * D
    row = dict(op="decode", kv=kv_name, B=B, ctx=L, hq=hq, hkv=hkv, d=D, page=page,
               kernel=pl.kernel, splits=binds[0].num_splits,
               kv_prefix_stable=bool(caps.kv_prefix_stable),
               tile=(tile or "default") + (f"/s{splits}" if splits else "") +
               (f"/grid={grid}" if grid else ""))
    return dict(row=row, binds=binds, n_rot=n_rot, kv_bytes=kv_bytes, flops=flops, q=q,
                keep=(cache, tables, scratch, out),
                launch=lambda i: binds[i].launch())


def decode_row(bw, pr, us, span):
    row = dict(pr["row"])
    row.update(us=us, kv_gbs=pr["kv_bytes"] / us / 1e3,
               pct_read_bw=100.0 * pr["kv_bytes"] / us / 1e3 / bw,
               tflops=pr["flops"] / us / 1e6, timed_span=span)
    if os.environ.get("B12X_ATTN_BENCH_TIMELINE", "0") != "0":
        # kernel start / end of one replay of 6 calls (bench_moe's CUPTI timeline)
        graph_timing.timeline(lambda i: pr["binds"][i % pr["n_rot"]].launch(), 6)
    return row


def sdpa_decode_us(B, L, hq, hkv, D, q0, row):
    """SDPA on contiguous bf16 K/V [B, Hkv, L, D] (q [B, Hq, 1, D], GQA); None on failure."""
    try:
        sd_rot = rotations(B * L * hkv * 2 * D * 2)
        ks = [torch.randn(B, hkv, L, D, dtype=torch.bfloat16, device=DEV) for _ in range(sd_rot)]
        vs = [torch.randn(B, hkv, L, D, dtype=torch.bfloat16, device=DEV) for _ in range(sd_rot)]
        qs = [q0.view(B, hq, 1, D)] * sd_rot
        try:
            with fused_sdpa_only():
                return time_graph_us(
                    lambda i: F.scaled_dot_product_attention(qs[i], ks[i], vs[i], enable_gqa=True),
                    sd_rot)
        except Exception as e:  # noqa: BLE001 - retry with the KV heads expanded (no GQA flag)
            if B * L * hq * 2 * D * 2 * sd_rot > 24 * 2 ** 30:
                raise
            print(f"  sdpa with enable_gqa failed ({type(e).__name__}); expanding KV heads",
                  flush=True)
            row["sdpa_note"] = "kv heads expanded (enable_gqa unsupported)"
            ks = [k.repeat_interleave(hq // hkv, dim=1) for k in ks]
            vs = [v.repeat_interleave(hq // hkv, dim=1) for v in vs]
            with fused_sdpa_only():
                return time_graph_us(
                    lambda i: F.scaled_dot_product_attention(qs[i], ks[i], vs[i]), sd_rot)
    except Exception as e:  # noqa: BLE001 - report and continue
        print(f"  sdpa failed: {type(e).__name__}: {e}", flush=True)
        return None


def bench_decode(rows, bw, B, L, hq, hkv, D, page, kv_name, tile=None, splits=None, grid=None):
    pr = prep_decode(B, L, hq, hkv, D, page, kv_name, tile, splits, grid)
    us = time_graph_us(pr["launch"], pr["n_rot"])
    row = decode_row(bw, pr, us, tuple(LAST_TIMING))
    q0 = pr["q"][0]
    del pr
    # the peer is measured on rows without a tile, split or grid override
    sdpa_us = None if (tile or splits or grid) else sdpa_decode_us(B, L, hq, hkv, D, q0, row)
    row["sdpa_us"] = sdpa_us
    row["vs_sdpa"] = (sdpa_us / us) if sdpa_us else None
    rows.append(row)
    torch.cuda.empty_cache()
    return row


def bench_decode_pair(rows, bw, B, L, hq, hkv, D, page):
    """The BF16 and FP8 KV rows of one shape with their timed replays interleaved (BF16, FP8,
    BF16, ...: the FP8 / BF16 ratio compares replays timed under the same conditions; each
    timed replay follows an untimed one of its own graph) and one SDPA peer for both."""
    preps = [prep_decode(B, L, hq, hkv, D, page, kv) for kv in ("bf16", "fp8")]
    graphs = [capture_graph(pr["launch"], pr["n_rot"]) for pr in preps]
    times = [[], []]
    t0 = time.time()
    for _ in range(REPS):
        for i in (0, 1):
            # An untimed replay of the same graph first, so every timed replay follows a replay
            # of its own graph as in time_graph_us (and the SDPA peer's timing): H200 round 57,
            # timed replays straight after the other dtype's graph cost ~0.8 us per call at
            # every shape (B=1 x 1k 7.0 vs 6.2, x 8k 13.4 vs 12.7-12.9, x 32k 35.7 vs 34.9,
            # 16/2/256 B=1 11.9 vs 11.0), a fixed ~8 us per replay of 10 calls.
            graphs[i].replay()
            torch.cuda.synchronize()
            times[i].append(replay_us(graphs[i]))
    span = (t0, time.time())
    del graphs
    out = [decode_row(bw, pr, median(t), span) for pr, t in zip(preps, times)]
    q0 = preps[0]["q"][0]
    del preps
    sdpa_us = sdpa_decode_us(B, L, hq, hkv, D, q0, out[0])
    for row in out:
        row["timing"] = "bf16/fp8 replays interleaved"
        row["sdpa_us"] = sdpa_us
        row["vs_sdpa"] = (sdpa_us / row["us"]) if sdpa_us else None
        rows.append(row)
    torch.cuda.empty_cache()
    return out


def bench_extend(rows, bw, B, new, prefix, hq, hkv, D, page, kv_name, tile=None):
    kv_dtype = torch.float8_e4m3fn if kv_name == "fp8" else torch.bfloat16
    L = prefix + new
    cache, tables = make_paged(B, L, hkv, D, page, kv_dtype, 1)
    k_cache, v_cache = cache[:, 0], cache[:, 1]
    T = B * new
    q = torch.randn(T, hq, D, dtype=torch.bfloat16, device=DEV)
    out = torch.empty(T, hq, D, dtype=torch.bfloat16, device=DEV)
    seq = torch.full((B,), L, dtype=torch.int32, device=DEV)
    cu = torch.arange(B + 1, dtype=torch.int32, device=DEV) * new
    kd = torch.full((B,), 0.05, device=DEV) if kv_name == "fp8" else None
    caps = paged.Caps(device=0, mode="extend", dtype=torch.bfloat16, kv_dtype=kv_dtype,
                      num_q_heads=hq, num_kv_heads=hkv, head_dim_qk=D, head_dim_vo=D,
                      page_size=page, max_total_q=T, max_batch=B,
                      max_page_table_width=tables[0].shape[1])
    pl = plan_with(caps, "B12X_ATTN_GRID", tile)  # tile: 'K=V,...' knobs
    scratch = torch.empty(pl.layout.nbytes, dtype=torch.uint8, device=DEV)
    bnd = pl.bind(scratch, q, k_cache, v_cache, out, tables[0], seq, cu, k_descale=kd,
                  v_descale=kd, return_lse=False)
    us = time_graph_us(lambda i: bnd.launch(), 1, per_graph=3, reps=3)
    # causal (right-aligned) pairs: row i sees prefix + i + 1 keys
    pairs = B * hq * (new * prefix + new * (new + 1) / 2)
    flops = 2.0 * pairs * 2 * D
    row = dict(op="extend", kv=kv_name, B=B, new=new, prefix=prefix, hq=hq, hkv=hkv, d=D,
               page=page, us=us, tflops=flops / us / 1e6, kernel=pl.kernel,
               tile=tile or "default")
    del bnd, cache
    if tile:  # peer measured on the default-tile row
        row["sdpa_us"] = row["sdpa_tflops"] = row["vs_sdpa"] = None
        rows.append(row)
        torch.cuda.empty_cache()
        return row
    sdpa_us = None
    try:
        from torch.nn.attention.bias import causal_lower_right
        qs = q.view(B, new, hq, D).transpose(1, 2).contiguous()
        ks = torch.randn(B, hkv, L, D, dtype=torch.bfloat16, device=DEV)
        vs = torch.randn(B, hkv, L, D, dtype=torch.bfloat16, device=DEV)
        if prefix == 0:
            fn = lambda i: F.scaled_dot_product_attention(qs, ks, vs, is_causal=True,  # noqa: E731
                                                          enable_gqa=True)
        else:
            mask = causal_lower_right(new, L)
            fn = lambda i: F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask,  # noqa: E731
                                                          enable_gqa=True)
        try:
            with fused_sdpa_only():
                sdpa_us = time_graph_us(fn, 1, per_graph=3, reps=3)
        except Exception as e:  # noqa: BLE001 - retry with the KV heads expanded (no GQA flag)
            print(f"  sdpa with enable_gqa failed ({type(e).__name__}); expanding KV heads",
                  flush=True)
            row["sdpa_note"] = "kv heads expanded (enable_gqa unsupported)"
            ks = ks.repeat_interleave(hq // hkv, dim=1)
            vs = vs.repeat_interleave(hq // hkv, dim=1)
            mask = causal_lower_right(new, L)
            if prefix == 0:
                fn = lambda i: F.scaled_dot_product_attention(qs, ks, vs, is_causal=True)  # noqa: E731
            else:
                fn = lambda i: F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask)  # noqa: E731
            with fused_sdpa_only():
                sdpa_us = time_graph_us(fn, 1, per_graph=3, reps=3)
        del ks, vs
    except Exception as e:  # noqa: BLE001
        print(f"  sdpa failed: {type(e).__name__}: {e}", flush=True)
    row["sdpa_us"] = sdpa_us
    row["sdpa_tflops"] = flops / sdpa_us / 1e6 if sdpa_us else None
    row["vs_sdpa"] = (sdpa_us / us) if sdpa_us else None
    rows.append(row)
    torch.cuda.empty_cache()
    return row


class ClockSampler:
    """nvidia-smi sampling of the SM clock, power and temperature every 10 ms (diagnostics:
    B12X_ATTN_BENCH_CLOCKS=1); `span(t0, t1)` summarises the samples inside a wall-clock span."""

    FIELDS = "timestamp,clocks.sm,power.draw,temperature.gpu,clocks.mem,temperature.memory"

    def __init__(self):
        self.proc = subprocess.Popen(
            ["nvidia-smi", "-i", str(torch.cuda.current_device()), f"--query-gpu={self.FIELDS}",
             "--format=csv,noheader,nounits", "-lms", "10"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.samples = []

    def stop(self):
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=5)
        for line in out.splitlines():
            f = [x.strip() for x in line.split(",")]
            try:
                t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                mem_t = float(f[5]) if len(f) > 5 and f[5].replace(".", "").isdigit() else -1.0
                self.samples.append((t, float(f[1]), float(f[2]), float(f[3]), float(f[4]), mem_t))
            except (ValueError, IndexError):
                continue

    def span(self, t0, t1, pad=0.012):
        got = [x for x in self.samples if t0 - pad <= x[0] <= t1 + pad]
        if not got:
            return "no samples"
        sm = [x[1] for x in got]
        return (f"sm {min(sm):.0f}-{max(sm):.0f} MHz (mean {sum(sm) / len(sm):.0f}), "
                f"power {max(x[2] for x in got):.0f} W, {max(x[3] for x in got):.0f} C, "
                f"mem {min(x[4] for x in got):.0f}-{max(x[4] for x in got):.0f} MHz "
                f"{max(x[5] for x in got):.0f} C, {len(got)} samples")


def fmt(v, nd=1):
    return "-" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


def write_json(rows, bw, gpu):
    return graph_timing.write_json("attention", rows, gpu, bw)


def main():
    if not torch.cuda.is_available() or not paged.is_supported():
        print("no supported CUDA device: benchmark skipped")
        return 0
    quick = "--quick" in sys.argv
    bw = read_bandwidth_gbs()
    gpu = torch.cuda.get_device_name(0)
    print(f"gpu: {gpu}  read bandwidth (torch sum of 2 GiB, graph): {bw:.0f} GB/s", flush=True)
    print("decode plans: paged.Caps defaults as vLLM's backend plans them (kv_prefix_stable=True: "
          "early K/V, kernels '_early')", flush=True)
    clocks = ClockSampler() if os.environ.get("B12X_ATTN_BENCH_CLOCKS", "0") != "0" else None
    rows = []
    decode_cases, pair_cases = [], []
    # Priority: the target shapes first (32/8/128, page 64), then the rest. Each shape's BF16 and
    # FP8 rows are timed as a pair with their graph replays interleaved (bench_decode_pair): H200
    # round 56, BF16 B=8 x 8k ran 72.4 us right after the B=128 rows vs 65.3 before them, the
    # next row (FP8 B=8) 40.1 vs 36.9, the one after that normal again, SM clock 1980 MHz and
    # memory clock 3201 MHz throughout; the old dtype-major order put FP8 B=8 (40.6 vs 37.6 in
    # round 55) there while its BF16 twin ran first of all.
    for L in (8192, 32768, 1024):
        for B in (8, 1, 32, 128):
            pair_cases.append((B, L, 32, 8, 128, 64))
    for (hq, hkv, D) in ((64, 8, 128), (16, 2, 256)):
        for B in (1, 8, 32):
            pair_cases.append((B, 8192, hq, hkv, D, 128))
    for B in (8, 32):
        pair_cases.append((B, 8192, 32, 8, 128, 128))
    # Split counts around the automatic choice (wide3: B=8 -> 4, B=32 -> 1).
    for B, sp in ((8, 8), (8, 2), (32, 2)):
        decode_cases.append((B, 8192, 32, 8, 128, 64, "bf16", None, sp))
    # Split counts for B=1 x 8k.
    for kv in ("bf16", "fp8"):
        for s in (16, 24, 48):
            decode_cases.append((1, 8192, 32, 8, 128, 64, kv, None, s))
    if quick:
        pair_cases, decode_cases = pair_cases[:3], []
    print(f"{'op':7}{'kv':5}{'B':>5}{'ctx':>7}{'hq/hkv/d':>12}{'page':>5}{'us':>10}{'GB/s':>8}"
          f"{'%bw':>6}{'TF/s':>7}{'sdpa_us':>10}{'x sdpa':>8}  kernel", flush=True)
    extend_cases = [(8, 2048, 0, 32, 8, 128, 64, "bf16"), (8, 2048, 8192, 32, 8, 128, 64, "bf16"),
                    (8, 2048, 8192, 32, 8, 128, 64, "fp8"),
                    # the session-3 grid order and rescale rule (knobs), for comparison
                    (8, 2048, 0, 32, 8, 128, 64, "bf16",
                     "B12X_ATTN_GRID=tiles,B12X_ATTN_RESCALE_SLACK=0")]
    custom = os.environ.get("B12X_ATTN_BENCH_CASES", "").strip()
    if custom:
        decode_cases, extend_cases, custom_jobs = [], [], []
        for ent in filter(None, (e.strip() for e in custom.split(";"))):
            f = ent.split(":")
            if f[0] == "p":
                hq, hkv, d, pg = (int(x) for x in f[3].split("x")) if len(f) > 3 else (32, 8, 128, 64)
                custom_jobs.append(("p", (int(f[1]), int(f[2]), hq, hkv, d, pg)))
            elif f[0] == "d":
                tile = f[4] if len(f) > 4 and f[4] else None
                splits = int(f[5]) if len(f) > 5 and f[5] else None
                hq, hkv, d, pg = (int(x) for x in f[6].split("x")) if len(f) > 6 else (32, 8, 128, 64)
                decode_cases.append((int(f[1]), int(f[2]), hq, hkv, d, pg, f[3], tile, splits))
                custom_jobs.append(("d", decode_cases[-1]))
            elif f[0] == "e":
                tile = f[5] if len(f) > 5 and f[5] else None
                extend_cases.append((int(f[1]), int(f[2]), int(f[3]), 32, 8, 128, 64, f[4], tile))
                custom_jobs.append(("e", extend_cases[-1]))
            else:
                raise SystemExit(f"B12X_ATTN_BENCH_CASES: bad entry {ent!r}")

    def print_decode(r):
        heads = "%d/%d/%d" % (r["hq"], r["hkv"], r["d"])
        print(f"{'decode':7}{r['kv']:5}{r['B']:>5}{r['ctx']:>7}"
              f"{heads:>12}{r['page']:>5}{r['us']:>10.1f}"
              f"{r['kv_gbs']:>8.0f}{r['pct_read_bw']:>6.1f}{r['tflops']:>7.1f}"
              f"{fmt(r['sdpa_us']):>10}{fmt(r['vs_sdpa'], 2):>8}  {r['kernel']} "
              f"s={r['splits']} tile={r['tile']}" + (" (pair)" if r.get("timing") else ""),
              flush=True)

    def run_decode(c):
        try:
            print_decode(bench_decode(rows, bw, *c))
        except Exception as e:  # noqa: BLE001
            print(f"decode {c} failed: {type(e).__name__}: {e}", flush=True)
            torch.cuda.empty_cache()

    def run_pair(c):
        try:
            for r in bench_decode_pair(rows, bw, *c):
                print_decode(r)
        except Exception as e:  # noqa: BLE001
            print(f"decode pair {c} failed: {type(e).__name__}: {e}", flush=True)
            torch.cuda.empty_cache()

    def run_extend(c):
        try:
            r = bench_extend(rows, bw, *c)
            heads = "%d/%d/%d" % (r["hq"], r["hkv"], r["d"])
            print(f"{'extend':7}{r['kv']:5}{r['B']:>5}{r['prefix']:>7}"
                  f"{heads:>12}{r['page']:>5}{r['us']:>10.1f}"
                  f"{'':>8}{'':>6}{r['tflops']:>7.1f}{fmt(r['sdpa_us']):>10}"
                  f"{fmt(r['vs_sdpa'], 2):>8}  {r['kernel']} sdpa {fmt(r['sdpa_tflops'])} TF/s",
                  flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"extend {c} failed: {type(e).__name__}: {e}", flush=True)
            torch.cuda.empty_cache()

    # Priority: the 8k target decode rows, then extend, then everything else (time budget).
    jobs = [("p", c) for c in pair_cases[:4]] + [("e", c) for c in extend_cases] + \
           [("p", c) for c in pair_cases[4:]] + [("d", c) for c in decode_cases]
    if custom:
        jobs = custom_jobs  # in the given order
    for i, (kind, c) in enumerate(jobs):
        if time.time() - T0 > BUDGET_S:
            print(f"time budget reached: skipped {len(jobs) - i} cases", flush=True)
            break
        {"d": run_decode, "p": run_pair, "e": run_extend}[kind](c)
        write_json(rows, bw, gpu)  # incremental: a hard timeout still leaves the rows so far
    if clocks is not None:
        clocks.stop()
        for r in rows:
            if r.get("timed_span"):
                print(f"clocks {r['op']} {r['kv']} B={r['B']} ctx={r['ctx']} "
                      f"{r['hq']}/{r['hkv']}/{r['d']} p{r['page']} {r['tile']}: {r['us']:.1f} us, "
                      f"{clocks.span(*r['timed_span'])}", flush=True)
    # FP8 vs BF16 speedup at the same decode shape.
    by = {(r["B"], r["ctx"], r["hq"], r["hkv"], r["d"], r["page"], r["kv"]): r
          for r in rows if r["op"] == "decode" and r["tile"] == "default"}
    for k, r in by.items():
        if k[-1] == "fp8" and k[:-1] + ("bf16",) in by:
            r["fp8_speedup_vs_bf16"] = by[k[:-1] + ("bf16",)]["us"] / r["us"]
    sp = [(k, r["fp8_speedup_vs_bf16"]) for k, r in by.items() if "fp8_speedup_vs_bf16" in r]
    for k, v in sp:
        print(f"fp8 vs bf16 B={k[0]} ctx={k[1]} {k[2]}/{k[3]}/{k[4]} page={k[5]}: {v:.2f}x")
    print("\nMarkdown (BENCHMARKS.md):")
    print("| op | kv | B | ctx/prefix | Hq/Hkv/D | page | us | KV GB/s | % read BW | TFLOP/s "
          "| SDPA us | x SDPA |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r.get("tile", "default") != "default":
            continue
        ctx = r.get("ctx", r.get("prefix"))
        print(f"| {r['op']} | {r['kv']} | {r['B']} | {ctx} | {r['hq']}/{r['hkv']}/{r['d']} | "
              f"{r['page']} | {r['us']:.1f} | {fmt(r.get('kv_gbs'), 0)} | "
              f"{fmt(r.get('pct_read_bw'))} | {r['tflops']:.1f} | {fmt(r.get('sdpa_us'))} | "
              f"{fmt(r.get('vs_sdpa'), 2)} |")
    path = write_json(rows, bw, gpu)
    print(f"wrote {path} ({len(rows)} rows) in {time.time() - T0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
