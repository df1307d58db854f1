"""Tensor-parallel sharding (b12x.parallel) on the CPU: shards are exact slices of the checkpoint
tensors, misaligned shards fail with messages naming the layer, dimension, value and rule, and the
CPU references give the unsharded answer on shards (column-parallel outputs are exact slices;
row-parallel and MoE partial outputs sum to the unsharded output within the summation-order
tolerance of their accumulators)."""

import numpy as np
import pytest

from b12x import gemm, parallel
from b12x.moe import fused_moe
from b12x.parallel import ShardingError

W = 2


def rng(seed=7):
    return np.random.default_rng(seed)


def bf16_bits(x):
    u = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_val(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def e4m3_bytes(g, shape):
    """Random finite E4M3 codes (no NaN 0x7F/0xFF), both signs."""
    return (g.integers(0, 0x7E, shape) | (g.integers(0, 2, shape) << 7)).astype(np.uint8)


def linear_problem(fmt, n, k, g):
    if fmt in ("fp8_block", "fp8_tensor", "mxfp8"):
        w = e4m3_bytes(g, (n, k))
    elif fmt in ("q8_0", "iq2_xxs", "iq2_xs"):
        bv, bb = {"q8_0": (32, 34), "iq2_xxs": (256, 66), "iq2_xs": (256, 74)}[fmt]
        w = g.integers(0, 256, (n, k // bv * bb), dtype=np.uint8)
    else:
        w = g.integers(0, 256, (n, k // 2), dtype=np.uint8)
    if fmt == "fp8_block":
        s = g.uniform(0.01, 0.1, ((n + 127) // 128, k // 128)).astype(np.float32)
    elif fmt.startswith("nvfp4"):
        s = g.integers(0x28, 0x40, (n, k // 16), dtype=np.uint8)
    elif fmt.startswith("mxfp") :
        s = g.integers(118, 126, (n, k // 32), dtype=np.uint8)
    else:
        s = None
    return w, s


# ---- shapes and contents ---------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["fp8_block", "nvfp4", "nvfp4_w4a16", "mxfp4", "mxfp8", "q8_0",
                                 "iq2_xs", "fp8_tensor"])
def test_column_shard_is_exact_slice(fmt):
    g = rng()
    sub = 256
    n, k = 2 * sub, 512
    w, s = linear_problem(fmt, n, k, g)
    bias = g.standard_normal(n).astype(np.float32)
    for r in range(W):
        sh = parallel.shard_column_parallel(fmt, w, s, r, W, bias=bias, output_sizes=[sub, sub],
                                            shared={"global_scale": 0.5})
        per = sub // W
        rows = np.r_[r * per:(r + 1) * per, sub + r * per:sub + (r + 1) * per]
        assert sh.kind == "column" and sh.out_features == 2 * per and sh.in_features == k
        assert sh.ranges == [(r * per, (r + 1) * per), (sub + r * per, sub + (r + 1) * per)]
        np.testing.assert_array_equal(sh.weight, w[rows])
        np.testing.assert_array_equal(sh.bias, bias[rows])
        assert sh.weight.flags.c_contiguous
        assert sh.shared == {"global_scale": 0.5}
        if fmt == "fp8_block":
            np.testing.assert_array_equal(sh.weight_scale, s[rows[::128] // 128])
            assert sh.weight_scale.shape == ((2 * per + 127) // 128, k // 128)
        elif s is not None:
            np.testing.assert_array_equal(sh.weight_scale, s[rows])
        else:
            assert sh.weight_scale is None


@pytest.mark.parametrize("fmt", ["fp8_block", "nvfp4", "mxfp4", "mxfp8", "q8_0", "iq2_xxs"])
def test_row_shard_is_exact_slice(fmt):
    g = rng(3)
    n, k = 192, 1024
    w, s = linear_problem(fmt, n, k, g)
    bias = g.standard_normal(n).astype(np.float32)
    kp = k // W
    bpv = {"q8_0": 34 / 32, "iq2_xxs": 66 / 256}.get(fmt, 0.5 if "fp4" in fmt else 1)
    for r in range(W):
        sh = parallel.shard_row_parallel(fmt, w, s, r, W, bias=bias)
        assert sh.kind == "row" and sh.in_features == kp and sh.out_features == n
        assert sh.ranges == [(r * kp, (r + 1) * kp)]
        c0, c1 = int(r * kp * bpv), int((r + 1) * kp * bpv)
        np.testing.assert_array_equal(sh.weight, w[:, c0:c1])
        if fmt == "fp8_block":
            np.testing.assert_array_equal(sh.weight_scale, s[:, r * kp // 128:(r + 1) * kp // 128])
        elif s is not None:
            gk = 16 if fmt.startswith("nvfp4") else 32
            np.testing.assert_array_equal(sh.weight_scale, s[:, r * kp // gk:(r + 1) * kp // gk])
        # vLLM: only rank 0 adds the bias, so the all-reduce adds it once.
        if r == 0:
            np.testing.assert_array_equal(sh.bias, bias)
        else:
            assert sh.bias is None
        sh2 = parallel.shard_row_parallel(fmt, w, s, r, W, bias=bias, bias_mode="after_reduce")
        assert sh2.bias is None
        np.testing.assert_array_equal(sh2.bias_after_reduce, bias)


def test_moe_shard_gate_and_up_halves_split_separately():
    g = rng(5)
    E, H, I = 3, 64, 128
    w13 = g.integers(0, 256, (E, 2 * I, H // 2), dtype=np.uint8)
    s13 = g.integers(0x28, 0x40, (E, 2 * I, H // 16), dtype=np.uint8)
    w2 = g.integers(0, 256, (E, H, I // 2), dtype=np.uint8)
    s2 = g.integers(0x28, 0x40, (E, H, I // 16), dtype=np.uint8)
    gs = np.full(E, 0.25, np.float32)
    ip = I // W
    for r in range(W):
        sh = parallel.shard_moe("modelopt_nvfp4", w13, s13, w2, s2, r, W, w13_layout="w31",
                                w13_global_scale=gs, w2_global_scale=gs)
        rows = np.r_[r * ip:(r + 1) * ip, I + r * ip:I + (r + 1) * ip]
        assert sh.intermediate_size == ip and sh.hidden_size == H and sh.num_experts == E
        assert sh.i_range == (r * ip, (r + 1) * ip) and sh.w13_layout == "w31"
        np.testing.assert_array_equal(sh.w13, w13[:, rows])
        np.testing.assert_array_equal(sh.w13_scale, s13[:, rows])
        np.testing.assert_array_equal(sh.w2, w2[:, :, r * ip // 2:(r + 1) * ip // 2])
        np.testing.assert_array_equal(sh.w2_scale, s2[:, :, r * ip // 16:(r + 1) * ip // 16])
        assert sh.shared["w13_global_scale"] is gs
        kw = sh.prepare_kwargs()
        assert kw["w1_blockscale"].shape == (E, 128, 4)  # pad128(2*64), pad4(64/16)
        assert kw["w2_blockscale"].shape == (E, 128, 4)  # pad128(64), pad4(64/16)
        # Relabelled source ([up; gate] = "w13") gives the same per-rank halves, swapped.
        sw = np.concatenate([w13[:, I:], w13[:, :I]], axis=1)
        sh13 = parallel.shard_moe("modelopt_nvfp4", sw, np.concatenate(
            [s13[:, I:], s13[:, :I]], axis=1), w2, s2, r, W, w13_layout="w13")
        np.testing.assert_array_equal(sh13.w13[:, :ip], sh.w13[:, ip:])
        np.testing.assert_array_equal(sh13.w13[:, ip:], sh.w13[:, :ip])


def test_moe_shard_relu2_and_ggml():
    g = rng(6)
    E, H, I = 2, 256, 512
    w13 = g.integers(0, 256, (E, I, H // 32 * 34), dtype=np.uint8)
    w2 = g.integers(0, 256, (E, H, I // 256 * 74), dtype=np.uint8)
    for r in range(W):
        sh = parallel.shard_moe("ggml", w13, None, w2, None, r, W, activation="relu2",
                                ggml_w13_dtype="q8_0", ggml_w2_dtype="iq2_xs")
        np.testing.assert_array_equal(sh.w13, w13[:, r * 256:(r + 1) * 256])
        np.testing.assert_array_equal(sh.w2, w2[:, :, r * 74:(r + 1) * 74])
    with pytest.raises(ShardingError, match=r"per-rank intermediate size I=128 breaks the rule "
                                            r"I % 256 == 0 \(FC2's iq2_xs blocks"):
        parallel.shard_moe("ggml", w13, None, w2, None, 0, 4, activation="relu2",
                           ggml_w2_dtype="iq2_xs")


# ---- alignment errors ----------------------------------------------------------------------
def test_alignment_errors_name_layer_dim_value_rule():
    g = rng()
    w, s = linear_problem("fp8_block", 256, 256, g)
    with pytest.raises(ShardingError, match=r"qkv_proj \(column-parallel fp8_block, rank 0 of 4\): "
                                            r"per-rank N=64 breaks the rule N % 128 == 0"):
        parallel.shard_column_parallel("fp8_block", w, s, 0, 4, layer="qkv_proj")
    with pytest.raises(ShardingError, match=r"o_proj \(row-parallel fp8_block, rank 1 of 4\): "
                                            r"per-rank K=64 breaks the rule K % 128 == 0"):
        parallel.shard_row_parallel("fp8_block", w, s, 1, 4, layer="o_proj")
    w, s = linear_problem("nvfp4", 64, 160, g)
    with pytest.raises(ShardingError, match=r"per-rank K=80 breaks the rule K % 32 == 0 \(the "
                                            r"NVFP4 kernel needs"):
        parallel.shard_row_parallel("nvfp4", w, s, 0, 2, layer="down_proj")
    with pytest.raises(ShardingError, match=r"K=160 does not divide evenly by world_size=3"):
        parallel.shard_row_parallel("nvfp4", w, s, 0, 3)
    with pytest.raises(ShardingError, match=r"N=64 does not divide evenly by world_size=3"):
        parallel.shard_column_parallel("nvfp4", w, s, 2, 3)
    with pytest.raises(ShardingError, match=r"rank=2 is outside \[0, world_size=2\)"):
        parallel.shard_column_parallel("nvfp4", w, s, 2, 2)
    with pytest.raises(ShardingError, match=r"weight_scale has shape \[128, 12\], expected "
                                            r"\[64, 10\].*shard before swizzling"):
        parallel.shard_column_parallel("nvfp4", w, np.zeros((128, 12), np.uint8), 0, 2)
    with pytest.raises(ShardingError, match=r"unknown linear format 'int4'"):
        parallel.shard_column_parallel("int4", w, s, 0, 2)
    # MXFP4 MoE: per-rank I % 32.
    E, H, I = 2, 64, 96
    w13 = np.zeros((E, 2 * I, H // 2), np.uint8)
    s13 = np.full((E, 2 * I, H // 32), 127, np.uint8)
    w2 = np.zeros((E, H, I // 2), np.uint8)
    s2 = np.full((E, H, I // 32), 127, np.uint8)
    with pytest.raises(ShardingError, match=r"experts.3 \(tensor-parallel MoE fp4_e8m0_k32, rank "
                                            r"0 of 2\): per-rank intermediate size I=48 breaks "
                                            r"the rule I % 32 == 0"):
        parallel.shard_moe("fp4_e8m0_k32", w13, s13, w2, s2, 0, 2, layer="experts.3")
    with pytest.raises(ShardingError, match=r"w13 has 192 rows, expected 96"):
        parallel.shard_moe("fp4_e8m0_k32", w13, s13, w2, s2, 0, 1, activation="relu2")
    # Kernel combination rules come from fused_moe.plan_weights on the per-rank shapes.
    E, H, I = 2, 96, 128
    w13 = np.zeros((E, 2 * I, H // 2), np.uint8)
    s13 = np.full((E, 2 * I, H // 32), 127, np.uint8)
    w2 = np.zeros((E, H, I // 2), np.uint8)
    s2 = np.full((E, H, I // 32), 127, np.uint8)
    with pytest.raises(ShardingError, match=r"per-rank I=64\).*w4a8_mx needs hidden % 256"):
        parallel.shard_moe("fp4_e8m0_k32", w13, s13, w2, s2, 0, 2, quant_mode="w4a8_mx")


# ---- CPU references: sharded == unsharded ----------------------------------------------------
def silu_mul_bf16(y, inter):
    """vLLM SiluAndMul on a [gate | up] output (rounded to bf16 like the GPU path)."""
    gate, up = y[:, :inter], y[:, inter:]
    h = gate / (1.0 + np.exp(-gate)) * up
    return bf16_bits(h.astype(np.float32))


def _partial_bound(parts_abs):
    return 1e-12 * parts_abs + 1e-300


def test_fp8_block_mlp_column_then_row_matches_unsharded():
    g = rng(11)
    M, H, I = 5, 256, 512
    w13, s13 = linear_problem("fp8_block", 2 * I, H, g)
    w2, s2 = linear_problem("fp8_block", H, I, g)
    b2 = g.standard_normal(H).astype(np.float32)
    x = bf16_bits(g.standard_normal((M, H)))
    y_full = gemm.reference_linear("fp8_block", w13, s13, x)
    h_full = silu_mul_bf16(y_full, I)
    out_full = gemm.reference_linear("fp8_block", w2, s2, h_full, bias=b2)
    parts = []
    for r in range(W):
        col = parallel.shard_column_parallel("fp8_block", w13, s13, r, W, output_sizes=[I, I])
        y_r = gemm.reference_linear("fp8_block", col.weight, col.weight_scale, x)
        rows = np.r_[col.ranges[0][0]:col.ranges[0][1], col.ranges[1][0]:col.ranges[1][1]]
        # Column-parallel: each output column is the same dot product -> exact slice.
        np.testing.assert_array_equal(y_r, y_full[:, rows])
        h_r = silu_mul_bf16(y_r, I // W)
        a, b = col.ranges[0]
        np.testing.assert_array_equal(h_r, h_full[:, a:b])
        row = parallel.shard_row_parallel("fp8_block", w2, s2, r, W, bias=b2)
        # The row layer quantises its input in 1x128 groups; K per rank % 128 keeps the groups.
        parts.append(gemm.reference_linear("fp8_block", row.weight, row.weight_scale, h_r,
                                           bias=row.bias))
    total = sum(parts)
    scale = np.abs(parts[0]) + np.abs(parts[1]) + np.abs(out_full)
    # fp64 partial sums regrouped: differences are fp64 rounding only.
    assert np.all(np.abs(total - out_full) <= 1e-12 * scale + 1e-12), np.abs(total - out_full).max()


def test_nvfp4_w4a4_row_parallel_activation_quantisation_is_per_block():
    from b12x import quantization
    from b12x.formats import unswizzle_block_scale
    g = rng(12)
    M, N, K = 3, 64, 512
    w, s = linear_problem("nvfp4", N, K, g)
    xf = g.standard_normal((M, K)).astype(np.float32)
    x = bf16_bits(xf)
    gs = float(448 * 6 / np.abs(bf16_val(x)).max())   # static input scale, shared by the ranks
    ws2 = 1 / 32.0                                      # weight_scale_2, shared
    alpha = ws2 / gs
    xq, xsf = quantization.quantize_nvfp4(x, gs)
    xsf_lin = unswizzle_block_scale(np.asarray(xsf), M, K // 16)
    full = gemm.reference_linear("nvfp4", w, s, xq, x_scale=np.asarray(xsf).reshape(-1),
                                 alpha=alpha)
    parts = []
    for r in range(W):
        sh = parallel.shard_row_parallel("nvfp4", w, s, r, W, shared={"alpha": alpha})
        a, b = sh.ranges[0]
        xq_r, xsf_r = quantization.quantize_nvfp4(np.ascontiguousarray(x[:, a:b]), gs)
        # Per-rank quantisation == slice of the unsharded quantisation (16-value blocks).
        np.testing.assert_array_equal(xq_r, xq[:, a // 2:b // 2])
        np.testing.assert_array_equal(
            unswizzle_block_scale(np.asarray(xsf_r), M, (b - a) // 16),
            xsf_lin[:, a // 16:b // 16])
        parts.append(gemm.reference_linear("nvfp4", sh.weight, sh.weight_scale, xq_r,
                                           x_scale=np.asarray(xsf_r).reshape(-1),
                                           alpha=sh.shared["alpha"]))
    total = parts[0] + parts[1]
    scale = np.abs(parts[0]) + np.abs(parts[1]) + np.abs(full)
    assert np.all(np.abs(total - full) <= 1e-12 * scale + 1e-12), np.abs(total - full).max()


def _moe_problem(g, source, E, H, I, act="silu"):
    rows = 2 * I if act != "relu2" else I
    w13 = g.integers(0, 256, (E, rows, H // 2), dtype=np.uint8)
    w2 = g.integers(0, 256, (E, H, I // 2), dtype=np.uint8)
    if source == "modelopt_nvfp4":
        s13 = g.integers(0x28, 0x40, (E, rows, H // 16), dtype=np.uint8)
        s2 = g.integers(0x28, 0x40, (E, H, I // 16), dtype=np.uint8)
    else:
        s13 = g.integers(118, 125, (E, rows, H // 32), dtype=np.uint8)
        s2 = g.integers(118, 125, (E, H, I // 32), dtype=np.uint8)
    return w13, s13, w2, s2


def _ref_kwargs(kw):
    out = dict(kw)
    out["w1"] = out.pop("w1_fp4")
    out["w2"] = out.pop("w2_fp4")
    return out


@pytest.mark.parametrize("mode,source,layout", [("nvfp4", "modelopt_nvfp4", "w31"),
                                                ("mxfp4", "fp4_e8m0_k32", "w31"),
                                                ("w4a16", "modelopt_nvfp4", "w13"),
                                                ("w4a8_mx", "fp4_e8m0_k32", "w31")])
def test_moe_sum_over_ranks_matches_unsharded(mode, source, layout):
    g = rng(21)
    E, H, I, M, topk = 4, 256, 128, 5, 2
    w13, s13, w2, s2 = _moe_problem(g, source, E, H, I)
    glob = {}
    if source == "modelopt_nvfp4":
        glob = dict(w13_global_scale=np.full(E, 1 / 16, np.float32),
                    w2_global_scale=np.full(E, 1 / 32, np.float32))
        if mode == "nvfp4":
            glob.update(a13_gscale=np.full(E, 2688 / 4.0, np.float32),
                        a2_gscale=np.full(E, 2688 / 2.0, np.float32))
    x = bf16_bits(g.standard_normal((M, H)))
    ids = g.integers(-1, E, (M, topk)).astype(np.int32)
    wts = g.random((M, topk)).astype(np.float32)
    full = parallel.shard_moe(source, w13, s13, w2, s2, 0, 1, w13_layout=layout, **glob)
    out_full = fused_moe.reference(weight_plan=full.weights_plan(mode), a=x, topk_ids=ids,
                                   topk_weights=wts, **_ref_kwargs(full.prepare_kwargs()))
    parts = []
    for r in range(W):
        sh = parallel.shard_moe(source, w13, s13, w2, s2, r, W, w13_layout=layout,
                                quant_mode=mode, **glob)
        parts.append(fused_moe.reference(weight_plan=sh.weights_plan(mode), a=x, topk_ids=ids,
                                         topk_weights=wts, **_ref_kwargs(sh.prepare_kwargs())))
    total = parts[0].astype(np.float64) + parts[1]
    scale = np.abs(parts[0]) + np.abs(parts[1]) + np.abs(out_full)
    # FC1 rows and the activation are per element (exact slices); FC2 activation blocks of 32 do
    # not straddle ranks; FC2 sums in fp64 per rank, then each rank rounds to fp32 and the top-k
    # combine adds in fp32: a few fp32 ulps of the partial magnitudes.
    assert np.abs(out_full).max() > 0
    assert np.all(np.abs(total - out_full) <= 4e-7 * topk * scale), \
        np.max(np.abs(total - out_full) / (scale + 1e-30))


def test_moe_naive_fused_slice_would_be_wrong():
    """The w13/w31 trap: slicing the fused 2I rows as one block gives rank 0 only gate rows."""
    g = rng(22)
    E, H, I, M, topk = 2, 64, 64, 3, 1
    w13, s13, w2, s2 = _moe_problem(g, "fp4_e8m0_k32", E, H, I)
    x = bf16_bits(g.standard_normal((M, H)))
    ids = np.zeros((M, topk), np.int32)
    wts = np.ones((M, topk), np.float32)
    full = parallel.shard_moe("fp4_e8m0_k32", w13, s13, w2, s2, 0, 1)
    ref = fused_moe.reference(weight_plan=full.weights_plan("mxfp4"), a=x, topk_ids=ids,
                              topk_weights=wts, **_ref_kwargs(full.prepare_kwargs()))
    good, naive = 0.0, 0.0
    for r in range(W):
        sh = parallel.shard_moe("fp4_e8m0_k32", w13, s13, w2, s2, r, W)
        plan = sh.weights_plan("mxfp4")
        good = good + fused_moe.reference(weight_plan=plan, a=x, topk_ids=ids, topk_weights=wts,
                                          **_ref_kwargs(sh.prepare_kwargs()))
        kw = _ref_kwargs(sh.prepare_kwargs())
        kw["w1"] = np.ascontiguousarray(w13[:, r * I:(r + 1) * I])
        kw["w1_blockscale"] = np.ascontiguousarray(s13[:, r * I:(r + 1) * I])
        naive = naive + fused_moe.reference(weight_plan=plan, a=x, topk_ids=ids,
                                            topk_weights=wts, **kw)
    err_good = np.abs(good - ref).max()
    err_naive = np.abs(naive - ref).max()
    assert err_good <= 1e-5 * np.abs(ref).max()
    assert err_naive > 1e-2 * np.abs(ref).max()


def test_tp_check_refuses_without_torch_or_gpus(capsys):
    """tools/tp_check.py imports without torch and refuses clearly when it cannot run."""
    import importlib.util
    import os
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location("tp_check", os.path.join(root, "tools",
                                                                           "tp_check.py"))
    tc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tc)
    assert set(tc.LAYERS) == {"fp8_block_mlp", "nvfp4_mlp", "moe_nvfp4", "moe_mxfp4"}
    try:
        import torch
        if torch.cuda.is_available() and torch.cuda.device_count() >= 2:
            pytest.skip("two GPUs visible: tools/tp_check.py would run")
        want = "refusing to run"
    except ImportError:
        want = "needs PyTorch with CUDA"
    assert tc.main(["--size", "small", "--layers", "moe_mxfp4"]) == 2
    assert want in capsys.readouterr().err
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"


def _sane_ggml(w, fmt):
    """Random GGML rows with a finite fp16 d (1/64) at the start of every block."""
    bb = {"q8_0": 34, "iq2_xxs": 66, "iq2_xs": 74}[fmt]
    w = w.copy()
    for c in range(0, w.shape[1], bb):
        w[:, c], w[:, c + 1] = 0x00, 0x24  # fp16 0x2400 = 2^-6
    return w


@pytest.mark.parametrize("fmt", ["fp8_block", "mxfp8", "nvfp4_w4a16", "mxfp4_w4a16", "mxfp4_w4a8",
                                 "q8_0", "iq2_xs", "iq2_xxs"])
def test_row_parallel_partials_sum_to_unsharded_every_a16_format(fmt):
    """Formats that take bf16 activations (quantised inside per 1x128 / 1x32 group, or not at
    all): K per rank keeps the groups, so the partials add up to the unsharded output."""
    g = rng(31)
    M, N, K = 3, 48, 1024
    w, s = linear_problem(fmt, N, K, g)
    if fmt in ("q8_0", "iq2_xs", "iq2_xxs"):
        w = _sane_ggml(w, fmt)
    x = bf16_bits(g.standard_normal((M, K)))
    kw = {"global_scale": 0.125} if fmt == "nvfp4_w4a16" else {}
    full = gemm.reference_linear(fmt, w, s, x, **kw)
    parts = []
    for r in range(W):
        sh = parallel.shard_row_parallel(fmt, w, s, r, W)
        a, b = sh.ranges[0]
        parts.append(gemm.reference_linear(fmt, sh.weight, sh.weight_scale,
                                           np.ascontiguousarray(x[:, a:b]), **kw))
    assert np.all(np.isfinite(full)) and np.abs(full).max() > 0
    total = parts[0] + parts[1]
    scale = np.abs(parts[0]) + np.abs(parts[1]) + np.abs(full)
    assert np.all(np.abs(total - full) <= 1e-12 * scale + 1e-12), np.abs(total - full).max()
