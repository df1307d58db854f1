#!/usr/bin/env python3
"""Two-GPU tensor-parallel check of the b12x linear and MoE ops (issue 7).

For each layer -- a column-parallel gate_up + row-parallel down MLP in block FP8 (DeepSeek 128x128)
and in NVFP4 W4A4, and a SiLU MoE layer with NVFP4 (W4A4) and MXFP4 (W4A4) experts -- the full
checkpoint tensors are generated from a seed (identically in every process), sharded with
``b12x.parallel`` for this rank, run through the b12x GPU ops, and the row-parallel partial outputs
are summed by an NCCL all-reduce through ``torch.distributed``. Rank 0 also runs the unsharded
layer on its GPU and checks the two-rank result against it; every rank checks that it holds the
same reduced tensor. Reported per layer and token count: median time of the one-GPU layer, of the
two-GPU layer (the shard's layer and its NCCL all-reduce captured in one CUDA graph), of the
shard's layer alone and of the all-reduce alone (each a graph replay after warm-up, the ranks
lined up by a barrier before each timed replay; the slowest rank's median), and the all-reduce
share (all-reduce alone / two-GPU layer).

Run (one process per GPU; needs >= 2 visible GPUs of one host, refuses otherwise)::

    B12X_LIBRARY=build/libb12x.so PYTHONPATH=python python3 tools/tp_check.py
    torchrun --nproc-per-node 2 tools/tp_check.py          # torchrun-compatible
    python3 tools/tp_check.py --simulate                     # ranks one after another, one GPU

``--simulate`` runs every rank's shard on one GPU in turn and sums the partials exactly as a
two-rank NCCL bf16 all-reduce does (one fp32 add rounded to bf16); the test suite uses it.
NVLink multicast stays off: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
NVSHMEM_DISABLE_NVLS=1 are set before any process group exists (the shared hosts require it).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.join(ROOT, "python") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "python"))

LAYERS = ("fp8_block_mlp", "nvfp4_mlp", "moe_nvfp4", "moe_mxfp4")

#: Shapes: "full" ~ Llama-3-8B MLP and Qwen3-30B-A3B MoE; "medium" (fewer experts, narrower
#: MLP) for a quick one-GPU timing; "small" for tests.
SIZES = {
    "medium": {"H": 2048, "I": 8192, "E": 32, "moe_H": 2048, "moe_I": 768, "topk": 8},
    "full": {"H": 4096, "I": 14336, "E": 128, "moe_H": 2048, "moe_I": 768, "topk": 8},
    "small": {"H": 512, "I": 1024, "E": 8, "moe_H": 256, "moe_I": 256, "topk": 4},
}

#: Two-rank vs one-GPU acceptance (both bf16 results): relative L2 error and cosine. A two-rank
#: all-reduce rounds each partial to bf16 before the add (relative 2^-9 of each partial), and a
#: column GEMM of N/W outputs may pick another split-K than the one of N outputs, flipping a bf16
#: rounding of the intermediate that the next layer re-quantises (FP8/FP4 codes).
REL_L2_TOL = 2e-2
COS_TOL = 0.999


# ---- problem generation (CPU, deterministic from the seed; identical in every process) -------
def _gen(seed: int):
    import torch
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def _u8(g, shape, lo=0, hi=256):
    import torch
    return torch.randint(lo, hi, shape, dtype=torch.uint8, generator=g)


def _e4m3(g, shape):
    # finite E4M3 codes (no 0x7F/0xFF NaN), both signs
    return _u8(g, shape, 0, 0x7E) | (_u8(g, shape, 0, 2) << 7)


def make_problem(layer: str, size: str = "small", seed: int = 1234) -> Dict[str, Any]:
    """Full (unsharded) checkpoint-layout tensors of a layer, CPU torch tensors."""
    import torch
    z = SIZES[size]
    g = _gen(seed + LAYERS.index(layer))
    if layer == "fp8_block_mlp":
        H, I = z["H"], z["I"]
        return {"layer": layer, "H": H, "I": I,
                "w13": _e4m3(g, (2 * I, H)),
                "s13": torch.rand(((2 * I + 127) // 128, H // 128), generator=g) * 2e-3 + 1e-3,
                "w2": _e4m3(g, (H, I)),
                "s2": torch.rand(((H + 127) // 128, I // 128), generator=g) * 2e-3 + 1e-3}
    if layer == "nvfp4_mlp":
        H, I = z["H"], z["I"]
        return {"layer": layer, "H": H, "I": I,
                "w13": _u8(g, (2 * I, H // 2)), "s13": _u8(g, (2 * I, H // 16), 0x28, 0x40),
                "w2": _u8(g, (H, I // 2)), "s2": _u8(g, (H, I // 16), 0x28, 0x40),
                # weight_scale_2 (dequant global, shared by the ranks)
                "ws13": 1.0 / 64, "ws2": 1.0 / 256}
    if layer in ("moe_nvfp4", "moe_mxfp4"):
        E, H, I = z["E"], z["moe_H"], z["moe_I"]
        p = {"layer": layer, "E": E, "H": H, "I": I, "topk": z["topk"],
             "w13": _u8(g, (E, 2 * I, H // 2)), "w2": _u8(g, (E, H, I // 2))}
        if layer == "moe_nvfp4":
            p["s13"] = _u8(g, (E, 2 * I, H // 16), 0x28, 0x40)
            p["s2"] = _u8(g, (E, H, I // 16), 0x28, 0x40)
            p["globals"] = {"w13_global_scale": torch.full((E,), 1 / 64, dtype=torch.float32),
                            "w2_global_scale": torch.full((E,), 1 / 64, dtype=torch.float32),
                            "a13_gscale": torch.full((E,), 2688 / 4.0, dtype=torch.float32),
                            "a2_gscale": torch.full((E,), 2688 / 16.0, dtype=torch.float32)}
        else:
            p["s13"] = _u8(g, (E, 2 * I, H // 32), 119, 124)
            p["s2"] = _u8(g, (E, H, I // 32), 117, 122)
            p["globals"] = {}
        return p
    raise ValueError(f"tp_check: unknown layer {layer!r} (known: {', '.join(LAYERS)})")


def make_inputs(problem: Dict[str, Any], m: int, seed: int = 99) -> Dict[str, Any]:
    """Activations (and routes for MoE) for m tokens, CPU tensors."""
    import torch
    g = _gen(seed + m)
    x = torch.randn((m, problem["H"]), generator=g).to(torch.bfloat16)
    out = {"x": x}
    if problem["layer"].startswith("moe"):
        E, k = problem["E"], problem["topk"]
        # distinct experts per token (like a top-k router)
        ids = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(m)]).to(torch.int32)
        w = torch.rand((m, k), generator=g)
        out["ids"] = ids
        out["wts"] = (w / w.sum(dim=1, keepdim=True)).to(torch.float32)
    return out


# ---- one rank's layer -------------------------------------------------------------------------
def _silu_mul(y, inter: int):
    import torch
    yf = y.float()
    return (torch.nn.functional.silu(yf[:, :inter]) * yf[:, inter:]).to(torch.bfloat16)


class RankLayer:
    """The layer's shard for (rank, world_size) on `device`; ``forward(inp)`` returns the rank's
    bf16 output ([M, H]; a partial sum when world_size > 1, the full output when it is 1)."""

    def __init__(self, problem: Dict[str, Any], rank: int, world_size: int, device,
                 act_scales: Optional[Dict[str, float]] = None):
        import torch
        from b12x import gemm, parallel
        self.p = problem
        self.layer = problem["layer"]
        self.rank, self.world = rank, world_size
        self.dev = torch.device(device)
        self._moe_plans: Dict[int, Any] = {}
        L = self.layer
        if L in ("fp8_block_mlp", "nvfp4_mlp"):
            fmt = "fp8_block" if L == "fp8_block_mlp" else "nvfp4"
            I = problem["I"]
            col = parallel.shard_column_parallel(fmt, problem["w13"], problem["s13"], rank,
                                                 world_size, output_sizes=[I, I],
                                                 layer=f"{L}.gate_up_proj")
            row = parallel.shard_row_parallel(fmt, problem["w2"], problem["s2"], rank, world_size,
                                              layer=f"{L}.down_proj")
            self.inter = col.out_features // 2
            self.col = gemm.pack_weight(fmt, col.weight.to(self.dev), col.weight_scale.to(self.dev))
            self.row = gemm.pack_weight(fmt, row.weight.to(self.dev), row.weight_scale.to(self.dev))
            if fmt == "nvfp4":
                # Static activation globals shared by every rank (multiply convention, like
                # vLLM's input_global_scale_inv); alpha = weight_scale_2 / act_global.
                s = act_scales or {}
                self.gs1 = float(s.get("gs1", 448 * 6 / 4.0))
                self.gs2 = float(s.get("gs2", 448 * 6 / 8.0))
                f32 = dict(dtype=torch.float32, device=self.dev)
                self.gs1_t = torch.tensor([self.gs1], **f32)
                self.gs2_t = torch.tensor([self.gs2], **f32)
                self.alpha1 = torch.tensor([problem["ws13"] / self.gs1], **f32)
                self.alpha2 = torch.tensor([problem["ws2"] / self.gs2], **f32)
        else:
            from b12x.moe import fused_moe
            self.fm = fused_moe
            source = "modelopt_nvfp4" if L == "moe_nvfp4" else "fp4_e8m0_k32"
            self.mode = "nvfp4" if L == "moe_nvfp4" else "mxfp4"
            sh = parallel.shard_moe(source, problem["w13"], problem["s13"], problem["w2"],
                                    problem["s2"], rank, world_size, activation="silu",
                                    w13_layout="w31", quant_mode=self.mode, layer=f"{L}.experts",
                                    **problem["globals"])
            self.plan_w = sh.weights_plan(self.mode, "bfloat16")
            kw = {k: v.to(self.dev) for k, v in sh.prepare_kwargs().items()}
            with torch.cuda.device(self.dev):
                self.experts = fused_moe.prepare_weights(plan=self.plan_w,
                                                         params_dtype=torch.bfloat16, **kw)

    # -- forward
    def _moe_binding(self, inp):
        import torch
        x = inp["x"]
        m = int(x.shape[0])
        key = (m, x.data_ptr(), inp["ids"].data_ptr())
        b = self._moe_plans.get(key)
        if b is None:
            plan = self.fm.plan(self.fm.Caps(max_tokens=m, num_topk=int(inp["ids"].shape[1]),
                                             device=self.dev, weight_plan=self.plan_w,
                                             quant_mode=self.mode))
            scratch = torch.empty(plan.scratch_specs()[0].shape, dtype=torch.uint8,
                                  device=self.dev)
            out = torch.empty_like(x)
            b = self.fm.bind(plan, scratch=scratch, a=x, experts=self.experts,
                             topk_weights=inp["wts"], topk_ids=inp["ids"], output=out)
            self._moe_plans[key] = (plan, scratch, b)
            return b
        return b[2]

    def forward(self, inp):
        from b12x import gemm, quantization
        x = inp["x"]
        if self.layer == "fp8_block_mlp":
            y = gemm.linear(x, self.col)
            return gemm.linear(_silu_mul(y, self.inter), self.row)
        if self.layer == "nvfp4_mlp":
            xq, xsf = quantization.quantize_nvfp4(x, self.gs1_t)
            y = gemm.linear(xq, self.col, x_scale=xsf, alpha=self.alpha1)
            h = _silu_mul(y, self.inter)
            hq, hsf = quantization.quantize_nvfp4(h, self.gs2_t)
            return gemm.linear(hq, self.row, x_scale=hsf, alpha=self.alpha2)
        return self.fm.run(binding=self._moe_binding(inp))

    def intermediate_amax(self, inp) -> float:
        """amax of the MLP intermediate (to pick the shared static activation scale)."""
        from b12x import gemm, quantization
        xq, xsf = quantization.quantize_nvfp4(inp["x"], self.gs1_t)
        y = gemm.linear(xq, self.col, x_scale=xsf, alpha=self.alpha1)
        return float(_silu_mul(y, self.inter).float().abs().max().item())


def act_scales_for(problem, inputs_list, device) -> Dict[str, float]:
    """Static NVFP4 activation globals (448*6/amax, as a calibrated checkpoint's input_scale),
    computed once from the unsharded layer; every rank uses the same values."""
    if problem["layer"] != "nvfp4_mlp":
        return {}
    amax_x = max(float(i["x"].float().abs().max().item()) for i in inputs_list)
    gs1 = 448 * 6 / amax_x
    full = RankLayer(problem, 0, 1, device, {"gs1": gs1, "gs2": 1.0})
    amax_h = max(full.intermediate_amax({"x": i["x"].to(device)}) for i in inputs_list)
    return {"gs1": gs1, "gs2": 448 * 6 / amax_h}


def reduce_like_nccl(parts: Sequence[Any]):
    """What a two-rank NCCL bf16 sum all-reduce returns: the fp32 sum rounded to bf16 (for more
    ranks, a left-to-right bf16 chain, which is one valid NCCL ring order)."""
    acc = parts[0]
    for p in parts[1:]:
        acc = (acc.float() + p.float()).to(acc.dtype)
    return acc


def compare(tp, ref) -> Dict[str, float]:
    t, r = tp.float(), ref.float()
    d = (t - r)
    rms = float(r.pow(2).mean().sqrt().item())
    rel = float(d.norm().item() / max(r.norm().item(), 1e-30))
    cos = float((t * r).sum().item() / max((t.norm() * r.norm()).item(), 1e-30))
    finite = bool(t.isfinite().all().item())
    return {"rel_l2": rel, "cos": cos, "max_abs_over_rms": float(d.abs().max().item()) / max(
        rms, 1e-30), "rms": rms, "finite": finite,
        "ok": bool(finite and rel <= REL_L2_TOL and cos >= COS_TOL and rms > 0)}


def simulate(layer: str, tokens: Sequence[int] = (4, 64), world_size: int = 2,
             size: str = "small", seed: int = 1234, device="cuda:0",
             timing: Optional[Sequence[int]] = None) -> List[Dict[str, Any]]:
    """All ranks' shards one after another on one GPU, summed like the all-reduce; compared with
    the unsharded layer on the same GPU. Returns one result dict per token count. ``timing`` =
    (iters, warmup) also times the unsharded layer and each rank's shard on this GPU (median ms;
    the slowest shard estimates the two-GPU compute time, without the all-reduce)."""
    import torch
    p = make_problem(layer, size, seed)
    inputs = [make_inputs(p, m) for m in tokens]
    dev_inputs = [{k: v.to(device) for k, v in i.items()} for i in inputs]
    scales = act_scales_for(p, inputs, device)
    full = RankLayer(p, 0, 1, device, scales)
    ranks = [RankLayer(p, r, world_size, device, scales) for r in range(world_size)]
    res = []
    for m, inp in zip(tokens, dev_inputs):
        ref = full.forward(inp).clone()
        parts = [rk.forward(inp).clone() for rk in ranks]
        torch.cuda.synchronize()
        c = compare(reduce_like_nccl(parts), ref)
        c.update({"layer": layer, "tokens": m, "world_size": world_size})
        if timing:
            it, wu = int(timing[0]), int(timing[1])
            c["one_gpu_ms"] = time_one_gpu(lambda: full.forward(inp), it, wu)
            c["rank_ms"] = [time_one_gpu(lambda rk=rk: rk.forward(inp), it, wu) for rk in ranks]
        res.append(c)
    return res


# ---- timing ------------------------------------------------------------------------------------
def _median_ms(starts, ends) -> float:
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def _graph_of(fn, warmup: int):
    """fn's launches captured in a CUDA graph after ``warmup`` eager calls on a side stream (the
    b12x plans and MoE bindings exist by then, so nothing plans during capture). Timing graph
    replays measures the GPU, not the Python wrappers' launch overhead (~100 us per layer)."""
    import torch
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(max(1, warmup)):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g, out


def time_one_gpu(fn, iters: int, warmup: int) -> float:
    """Median ms of one graph replay of fn."""
    import torch
    g, _ = _graph_of(fn, warmup)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(iters)]
    for s, e in ev:
        s.record()
        g.replay()
        e.record()
    torch.cuda.synchronize()
    return _median_ms([s for s, _ in ev], [e for _, e in ev])


def _timed(barrier, iters: int, body) -> float:
    """Median ms of ``body()`` between two CUDA events, the ranks lined up by a barrier first (so
    a collective's time is its own, not the other rank's lag)."""
    import torch
    t = []
    for _ in range(iters):
        a, c = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        barrier()
        a.record()
        body()
        c.record()
        c.synchronize()
        t.append(a.elapsed_time(c))
    return statistics.median(t)


def time_tp(fn, all_reduce, barrier, iters: int, warmup: int):
    """Median (total, compute, all-reduce) ms of one rank. Each is timed on its own as a CUDA
    graph replay: the shard's layer, the NCCL all-reduce of its output, and both in one graph
    (the layer as a serving engine replays it). NCCL collectives are capturable once the
    communicator exists (the warm-up runs them eagerly); if capture fails the all-reduce runs
    eagerly instead (reported in the result)."""
    import torch
    g, y = _graph_of(fn, warmup)
    for _ in range(3):
        g.replay()
        all_reduce(y)
    torch.cuda.synchronize()
    captured = True
    try:
        g_ar, _ = _graph_of(lambda: all_reduce(y), 1)
        g_all, _ = _graph_of(lambda: all_reduce(fn()), 1)
    except Exception as e:  # pragma: no cover - depends on the NCCL/torch build
        print(f"tp_check: NCCL all-reduce not capturable ({e}); timing it eagerly", flush=True)
        captured = False
    comp = _timed(barrier, iters, g.replay)
    if captured:
        ar = _timed(barrier, iters, g_ar.replay)
        tot = _timed(barrier, iters, g_all.replay)
    else:
        ar = _timed(barrier, iters, lambda: all_reduce(y))
        tot = _timed(barrier, iters, lambda: (g.replay(), all_reduce(y)))
    return tot, comp, ar, captured


# ---- the distributed worker ---------------------------------------------------------------------
def worker(local_rank: int, world_size: int, args_dict: Dict[str, Any]) -> None:
    import torch
    import torch.distributed as dist
    _multicast_off()
    args = argparse.Namespace(**args_dict)
    rank = int(os.environ.get("RANK", local_rank))
    torch.cuda.set_device(local_rank)
    dev = torch.device("cuda", local_rank)
    dist.init_process_group("nccl", rank=rank, world_size=world_size, device_id=dev)
    try:
        failed = _worker_body(rank, world_size, dev, args)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    if failed:
        raise SystemExit(1)


def _worker_body(rank: int, world_size: int, dev, args) -> bool:
    import torch
    import torch.distributed as dist
    results = []
    failed = False
    for layer in args.layers:
        p = make_problem(layer, args.size, args.seed)
        inputs = [make_inputs(p, m) for m in args.tokens]
        dev_inputs = [{k: v.to(dev) for k, v in i.items()} for i in inputs]
        # Static activation scales: computed on rank 0 from the unsharded layer, broadcast.
        sc = torch.zeros(2, dtype=torch.float64, device=dev)
        if rank == 0 and layer == "nvfp4_mlp":
            s = act_scales_for(p, inputs, dev)
            sc[0], sc[1] = s["gs1"], s["gs2"]
        dist.broadcast(sc, 0)
        scales = {"gs1": float(sc[0]), "gs2": float(sc[1])} if layer == "nvfp4_mlp" else {}
        shard = RankLayer(p, rank, world_size, dev, scales)
        full = RankLayer(p, 0, 1, dev, scales) if rank == 0 else None
        for m, inp in zip(args.tokens, dev_inputs):
            # correctness: one reduced result, identical on every rank, vs the one-GPU layer
            y = shard.forward(inp).clone()
            dist.all_reduce(y)
            ys = [torch.empty_like(y) for _ in range(world_size)]
            dist.all_gather(ys, y)
            same = all(torch.equal(ys[0].view(torch.int16), t.view(torch.int16)) for t in ys)
            # one-GPU timing on rank 0 while the others wait
            t1 = None
            if rank == 0:
                ref = full.forward(inp).clone()
                c = compare(y, ref)
                t1 = time_one_gpu(lambda: full.forward(inp), args.iters, args.warmup)
            dist.barrier()
            tot, comp, ar, captured = time_tp(lambda: shard.forward(inp), dist.all_reduce,
                                    lambda: dist.barrier(device_ids=[dev.index]), args.iters,
                                    args.warmup)
            # report the slowest rank's times (the layer finishes when every rank has)
            tt = torch.tensor([tot, comp, ar], dtype=torch.float64, device=dev)
            dist.all_reduce(tt, op=dist.ReduceOp.MAX)
            if rank == 0:
                c.update({"layer": layer, "tokens": m, "world_size": world_size,
                          "ranks_identical": same, "one_gpu_ms": t1,
                          "tp_ms": float(tt[0]), "tp_compute_ms": float(tt[1]),
                          "allreduce_ms": float(tt[2]), "allreduce_in_graph": captured,
                          "allreduce_share": float(tt[2]) / max(float(tt[0]), 1e-9),
                          "speedup": t1 / max(float(tt[0]), 1e-9)})
                c["ok"] = bool(c["ok"] and same)
                failed |= not c["ok"]
                results.append(c)
                print(_row(c), flush=True)
        del shard, full
        torch.cuda.empty_cache()
    if rank == 0:
        _finish(results, args)
    return failed


def _row(c: Dict[str, Any]) -> str:
    s = (f"{c['layer']:<14} M={c['tokens']:<5} {'OK  ' if c['ok'] else 'FAIL'} "
         f"rel_l2={c['rel_l2']:.2e} cos={c['cos']:.6f}")
    if c.get("rank_ms") is not None:
        s += (f"  1gpu={c['one_gpu_ms']:.3f}ms  per-rank shard on the same GPU="
              f"{'/'.join(f'{t:.3f}' for t in c['rank_ms'])}ms (no all-reduce)")
    elif c.get("one_gpu_ms") is not None:
        s += (f"  1gpu={c['one_gpu_ms']:.3f}ms  {c['world_size']}gpu={c['tp_ms']:.3f}ms "
              f"(compute {c['tp_compute_ms']:.3f}, all-reduce {c['allreduce_ms']:.3f} = "
              f"{100 * c['allreduce_share']:.0f}%)  speedup={c['speedup']:.2f}x")
    return s


def _finish(results, args) -> None:
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"),
                       "size": args.size, "results": results}, f, indent=1)
        print(f"tp_check: results written to {args.json}")


def markdown_table(path: str) -> str:
    """The results file of a two-GPU run (--json) as a markdown table (docs/TENSOR_PARALLEL.md)."""
    with open(path) as f:
        d = json.load(f)
    out = ["| layer | M | rel L2 | cos | ranks identical | 1 GPU (us) | 2 GPUs (us) | "
           "shard layer (us) | all-reduce (us) | all-reduce share | speed-up |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in d["results"]:
        out.append(f"| {r['layer']} | {r['tokens']} | {r['rel_l2']:.2e} | {r['cos']:.6f} | "
                   f"{'yes' if r['ranks_identical'] else 'no'} | {r['one_gpu_ms'] * 1e3:.0f} | "
                   f"{r['tp_ms'] * 1e3:.0f} | {r['tp_compute_ms'] * 1e3:.0f} | "
                   f"{r['allreduce_ms'] * 1e3:.0f} | {100 * r['allreduce_share']:.0f}% | "
                   f"{r['speedup']:.2f}x |")
    return "\n".join(out)


def _multicast_off() -> None:
    """NVLink multicast off in NCCL, PyTorch symmetric memory and NVSHMEM: on shared hosts a
    program using it can take every GPU of the host out of service."""
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
    os.environ["NVSHMEM_DISABLE_NVLS"] = "1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", nargs="+", default=list(LAYERS), choices=LAYERS)
    ap.add_argument("--tokens", nargs="+", type=int, default=[1, 16, 256])
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--json", default=None, help="write the results here (rank 0)")
    ap.add_argument("--simulate", action="store_true",
                    help="run the ranks one after another on one GPU (no NCCL)")
    ap.add_argument("--table", default=None, metavar="RESULTS_JSON",
                    help="print a results file of an earlier run as a markdown table and exit")
    args = ap.parse_args(argv)
    if args.table:
        print(markdown_table(args.table))
        return 0
    # The workplace requires NVLink multicast (NVLS) off; children inherit the environment.
    _multicast_off()
    try:
        import torch
    except ImportError:
        print("tp_check: needs PyTorch with CUDA (torch.distributed, NCCL)", file=sys.stderr)
        return 2
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if args.simulate:
        if n < 1:
            print("tp_check: --simulate needs one CUDA GPU, none is visible", file=sys.stderr)
            return 2
        ok = True
        for layer in args.layers:
            for c in simulate(layer, args.tokens, args.world_size, args.size, args.seed,
                              timing=(args.iters, args.warmup)):
                ok &= c["ok"]
                print(_row(c), flush=True)
        return 0 if ok else 1
    if args.world_size < 2:
        print("tp_check: --world-size must be >= 2 for the distributed check", file=sys.stderr)
        return 2
    torchrun = "WORLD_SIZE" in os.environ and "LOCAL_RANK" in os.environ
    world = int(os.environ["WORLD_SIZE"]) if torchrun else args.world_size
    if n < world or (torchrun and n <= int(os.environ["LOCAL_RANK"])):
        print(f"tp_check: refusing to run: the {world}-rank tensor-parallel check needs {world} "
              f"GPUs of one host (one process per GPU, NCCL all-reduce), but {n} "
              f"{'is' if n == 1 else 'are'} visible (CUDA_VISIBLE_DEVICES="
              f"{os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}). Use --simulate to run the "
              f"ranks one after another on one GPU.", file=sys.stderr)
        return 2
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_nccl_available():
        print("tp_check: this PyTorch build has no NCCL backend", file=sys.stderr)
        return 2
    print(f"tp_check: {world} ranks, GPUs: "
          f"{', '.join(torch.cuda.get_device_name(i) for i in range(world))}; "
          f"NCCL_NVLS_ENABLE={os.environ['NCCL_NVLS_ENABLE']}; size={args.size}", flush=True)
    if torchrun:
        try:
            worker(int(os.environ["LOCAL_RANK"]), world, vars(args))
        except SystemExit as e:
            return int(e.code or 0)
        return 0
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    import torch.multiprocessing as mp
    try:
        mp.spawn(worker, args=(world, vars(args)), nprocs=world, join=True)
    except Exception as e:  # a rank raised or exited non-zero
        print(f"tp_check: a rank failed ({e})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
