#!/usr/bin/env python3
"""Summarise the issue performance targets from the newest benchmark JSON files.

    python3 tools/targets.py [RESULTS_DIR]   (default bench/results)

Prints one markdown table per area (linear, MoE, attention) with the measured value of every
target and whether it is met, so docs/STATUS.md and the closing notes quote the same numbers.
"""
import glob
import json
import os
import sys


def newest(results, area):
    # By the date the bench wrote, then mtime (a fresh clone gives every file the same mtime;
    # tools/bench_table.py picks the same way, so both tools quote one file).
    data = [json.load(open(f)) | {"_mtime": os.path.getmtime(f)}
            for f in glob.glob(os.path.join(results, f"{area}-*.json"))]
    return max(data, key=lambda d: (d.get("date", ""), d["_mtime"])) if data else None


def rng(vals, fmt="{:.2f}"):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    return fmt.format(lo) if abs(hi - lo) < 1e-9 else f"{fmt.format(lo)}–{fmt.format(hi)}"


def verdict(vals, target, higher=True):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "not measured"
    ok = all((v >= target) if higher else (v <= target) for v in vals)
    some = any((v >= target) if higher else (v <= target) for v in vals)
    return "met" if ok else ("partly met" if some else "missed")


def linear(d):
    rows = [r for r in d["rows"] if "x_cublas_bf16" in r]
    print(f"### Linear (commit {d['commit']}, read BW {d['read_bw_gbs']:.0f} GB/s)\n")
    print("| target | measured | verdict |\n|---|---|---|")

    def sel(ops, M, big=None):
        out = [r for r in rows if r["op"] in ops and r["M"] == M]
        if big is not None:
            out = [r for r in out if (r["weight_bytes"] >= 16e6) == big]
        return out

    w4 = ["nvfp4", "nvfp4_w4a16", "mxfp4", "mxfp4_w4a16"]
    r = sel(w4, 1)
    x = [v["x_cublas_bf16"] for v in r]
    print(f"| W4A16/W4A4 M=1 >= 3.0x cuBLAS BF16 | {rng(x)}x | {verdict(x, 3.0)} |")
    r = [v for v in sel(w4, 1) if v["weight_bytes"] >= 16e6]
    x = [v["pct_bw"] for v in r]
    print(f"| W4 M=1 >= 75% read BW (weights >= 16 MB) | {rng(x, '{:.0f}')}% | {verdict(x, 75)} |")
    x = [v["x_cublas_bf16"] for v in sel(w4, 16)]
    print(f"| W4 M=16 >= 2.5x cuBLAS BF16 | {rng(x)}x | {verdict(x, 2.5)} |")
    x = [v["x_cublas_bf16"] for v in sel(["iq2_xs", "iq2_xxs"], 1)]
    print(f"| IQ2 M=1 >= 4x cuBLAS BF16 | {rng(x)}x | {verdict(x, 4.0)} |")
    x = [v["x_cublas_bf16"] for v in sel(["q8_0"], 1)]
    print(f"| Q8_0 M=1 >= 1.6x cuBLAS BF16 | {rng(x)}x | {verdict(x, 1.6)} |")
    f8 = ["fp8_tensor", "fp8_block", "mxfp8"]
    x = [v["x_cublaslt_fp8"] for M in (1, 4, 16) for v in sel(f8, M)]
    print(f"| FP8 M<=16 >= 1.2x cuBLASLt FP8 | {rng(x)}x | {verdict(x, 1.2)} |")
    # The issue also names cuBLASLt's block-scaled FP8 where it exists (M >= 2 here): the
    # like-for-like peer of the block FP8 / MXFP8 rows, reported beside the per-tensor verdict.
    x = [v["x_cublaslt_fp8_block"] for M in (4, 16) for v in sel(f8[1:], M) if v.get("x_cublaslt_fp8_block")]
    if x:
        print(f"| (beside it) block FP8 / MXFP8 M=4,16 vs cuBLASLt block FP8 | {rng(x)}x | {verdict(x, 1.2)} |")
    for fam, key in (("BF16-MMA formats", "x_cublas_bf16"), ("FP8 formats", "x_cublaslt_fp8")):
        ops = f8 if fam == "FP8 formats" else [o for o in {v["op"] for v in rows} if o not in f8]
        x = [v[key] for v in sel(ops, 2048)]
        print(f"| M=2048 {fam} >= 0.5x peer | {rng(x)}x | {verdict(x, 0.5)} |")
    print()


def moe(d):
    rows = d["rows"]
    print(f"### MoE (commit {d['commit']}, read BW {d['read_bw_gbs']:.0f} GB/s)\n")
    print("| target | measured | verdict |\n|---|---|---|")
    small = [r for r in rows if r["M"] <= 8]
    x = [r["pct_read_bw"] for r in small]
    print(f"| W4 modes M<=8 >= 70% read BW of touched bytes | {rng(x, '{:.0f}')}% | {verdict(x, 70)} |")
    x = [r["speedup_vs_peer"] for r in small]
    print(f"| W4 modes M<=8 >= 3x BF16 peer | {rng(x)}x | {verdict(x, 3.0)} |")
    x = [r["speedup_vs_peer"] for r in rows if r["M"] == 4096]
    print(f"| M=4096 >= 0.5x BF16 peer | {rng(x)}x | {verdict(x, 0.5)} |")
    print()


def attention(d):
    rows = [r for r in d["rows"] if r.get("tile") in (None, "default")]
    print(f"### Attention (commit {d['commit']}, read BW {d['read_bw_gbs']:.0f} GB/s)\n")
    print("| target | measured | verdict |\n|---|---|---|")
    big = [r for r in rows if r["op"] == "decode" and r["kv"] == "bf16" and r["ctx"] >= 8192 and r["B"] >= 8]
    x = [r["pct_read_bw"] for r in big]
    print(f"| BF16 decode >= 8k, B >= 8: >= 85% read BW | {rng(x, '{:.0f}')}% | {verdict(x, 85)} |")
    x = [r["vs_sdpa"] for r in big if r.get("vs_sdpa")]
    print(f"| ... and >= 0.9x SDPA | {rng(x)}x | {verdict(x, 0.9)} |")
    b1 = [r["vs_sdpa"] for r in rows if r["op"] == "decode" and r["kv"] == "bf16" and r["B"] == 1
          and r["ctx"] == 8192 and r.get("vs_sdpa")]
    print(f"| B=1 x 8k >= 1.2x SDPA | {rng(b1)}x | {verdict(b1, 1.2)} |")
    sp = []
    for r in rows:
        if r["op"] == "decode" and r["kv"] == "fp8":
            twin = [t for t in rows if t["op"] == "decode" and t["kv"] == "bf16" and
                    all(t[k] == r[k] for k in ("B", "ctx", "hq", "hkv", "d", "page"))]
            if twin:
                sp.append(twin[0]["us"] / r["us"])
    print(f"| FP8 KV decode >= 1.6x faster than BF16 KV | {rng(sp)}x | {verdict(sp, 1.6)} |")
    x = [r["vs_sdpa"] for r in rows if r["op"] == "extend" and r.get("vs_sdpa")]
    print(f"| extend >= 0.5x SDPA TFLOP/s | {rng(x)}x | {verdict(x, 0.5)} |")
    print()


def main():
    results = sys.argv[1] if len(sys.argv) > 1 else "bench/results"
    for area, fn in (("gemm", linear), ("moe", moe), ("attention", attention)):
        d = newest(results, area)
        if d is None:
            print(f"### {area}: no results\n")
        else:
            fn(d)


if __name__ == "__main__":
    main()
