"""Tensor parallelism on one GPU (torch + CUDA; skipped without them): every rank's shard runs
through the real b12x GPU ops one after the other, the partial outputs are summed the way a
two-rank NCCL bf16 all-reduce sums them, and the result matches the unsharded layer on the same
GPU. The layers and runners are tools/tp_check.py's (the two-GPU check), so this also exercises
everything that check does except the process group and NCCL."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tp_check():
    spec = importlib.util.spec_from_file_location("tp_check",
                                                  os.path.join(ROOT, "tools", "tp_check.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _supported(torch):
    from b12x import gemm
    from b12x.moe import fused_moe
    if not gemm.is_supported(0) or not fused_moe.is_supported(0):
        pytest.skip("device not supported by this build")


@pytest.mark.parametrize("layer", ["fp8_block_mlp", "nvfp4_mlp", "moe_nvfp4", "moe_mxfp4"])
def test_gpu_tp2_sum_of_shards_matches_one_gpu(cuda_torch, layer):
    _supported(cuda_torch)
    tc = _tp_check()
    res = tc.simulate(layer, tokens=(3, 40), world_size=2, size="small", device="cuda:0")
    for c in res:
        assert c["ok"], c
        # Typical agreement is far inside the acceptance bound (bf16 rounding of the partials).
        assert c["rel_l2"] < tc.REL_L2_TOL, c


def _bf16_ulp_bound(*ts):
    return sum(t.float().abs() for t in ts) * 2.0 ** -7


@pytest.mark.parametrize("fmt_layer", ["fp8_block_mlp", "nvfp4_mlp"])
def test_gpu_column_outputs_are_slices_and_row_partials_sum(cuda_torch, fmt_layer):
    """Per-layer checks with tight bounds: a column-parallel rank's outputs equal the unsharded
    outputs' columns (up to one bf16 rounding: another split-K may sum in another fp32 order);
    row-parallel partials on the same input sum to the unsharded output (up to the bf16
    rounding of each partial)."""
    torch = cuda_torch
    _supported(torch)
    from b12x import gemm, quantization
    tc = _tp_check()
    dev = torch.device("cuda:0")
    p = tc.make_problem(fmt_layer, "small", 7)
    inp = {k: v.to(dev) for k, v in tc.make_inputs(p, 5).items()}
    scales = tc.act_scales_for(p, [inp], dev)
    full = tc.RankLayer(p, 0, 1, dev, scales)
    ranks = [tc.RankLayer(p, r, 2, dev, scales) for r in range(2)]
    I = p["I"]
    x = inp["x"]
    nv = fmt_layer == "nvfp4_mlp"

    def col(layer):
        if nv:
            xq, xsf = quantization.quantize_nvfp4(x, layer.gs1_t)
            return gemm.linear(xq, layer.col, x_scale=xsf, alpha=layer.alpha1)
        return gemm.linear(x, layer.col)

    def row(layer, h):
        if nv:
            hq, hsf = quantization.quantize_nvfp4(h.contiguous(), layer.gs2_t)
            return gemm.linear(hq, layer.row, x_scale=hsf, alpha=layer.alpha2)
        return gemm.linear(h.contiguous(), layer.row)

    y_full = col(full)
    h_full = tc._silu_mul(y_full, I)
    out_full = row(full, h_full)
    parts = []
    for r, rk in enumerate(ranks):
        per = I // 2
        idx = torch.cat([torch.arange(r * per, (r + 1) * per),
                         torch.arange(I + r * per, I + (r + 1) * per)]).to(dev)
        y_r = col(rk)
        want = y_full.index_select(1, idx)
        rms = want.float().pow(2).mean().sqrt()
        assert torch.all((y_r.float() - want.float()).abs() <= _bf16_ulp_bound(want) + 1e-3 * rms)
        parts.append(row(rk, h_full[:, r * per:(r + 1) * per]))
    torch.cuda.synchronize()
    total = parts[0].float() + parts[1].float()
    bound = _bf16_ulp_bound(parts[0], parts[1], out_full) + 1e-3 * out_full.float().pow(2).mean(
    ).sqrt()
    err = (total - out_full.float()).abs()
    assert torch.all(err <= bound), float((err - bound).max())


def test_gpu_tp_check_refuses_with_one_gpu(cuda_torch, capsys):
    torch = cuda_torch
    if torch.cuda.device_count() >= 2:
        pytest.skip("two GPUs are visible: the refusal path does not apply")
    tc = _tp_check()
    assert tc.main(["--layers", "moe_nvfp4", "--size", "small"]) == 2
    err = capsys.readouterr().err
    assert "refusing to run" in err and "needs 2 GPUs" in err and "1 is visible" in err
    assert os.environ.get("NCCL_NVLS_ENABLE") == "0"


def test_gpu_tp_check_simulate_cli(cuda_torch, capsys):
    _supported(cuda_torch)
    tc = _tp_check()
    assert tc.main(["--simulate", "--size", "small", "--layers", "moe_mxfp4", "--tokens", "2"]) == 0
    assert "moe_mxfp4" in capsys.readouterr().out


class TPReport(UserWarning):
    """Informational: the one-GPU tensor-parallel numbers, shown in pytest's warnings summary
    (the GPU check keeps only pytest's output)."""


def test_gpu_tp2_medium_shapes_report(cuda_torch):
    """Medium shapes (MLP H 2048 / I 8192; MoE 32 experts, H 2048, I 768, top-8), decode and
    prefill token counts: the sum of the two shards matches the one-GPU layer, and the one-GPU
    layer time and each shard's time on the same GPU are reported."""
    import warnings
    _supported(cuda_torch)
    tc = _tp_check()
    lines = []
    bad = []
    for layer in tc.LAYERS:
        for c in tc.simulate(layer, tokens=(1, 64), world_size=2, size="medium",
                             device="cuda:0", timing=(20, 5)):
            lines.append(tc._row(c))
            if not c["ok"]:
                bad.append(c)
    warnings.warn(TPReport("tp2 one-GPU simulation (medium shapes):\n" + "\n".join(lines)))
    assert not bad, bad
