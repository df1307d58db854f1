"""Warm-up, kernel-resolution freeze, and the checkpoint -> GPU round trip from Python.

The registry and the warm-up's layer parsing run on the CPU (the fused-MoE plan needs no
device); the warm-up launches and the checkpoint round trip need a GPU (and torch for the
latter) and skip without them."""

import json
import os

import numpy as np
import pytest

import b12x
import b12x.gemm  # noqa: F401  (b12x.gemm.linear, reference_linear)
from b12x import _capi
from b12x import checkpoint as ck
from b12x.moe import fused_moe


@pytest.fixture(autouse=True)
def _unfrozen():
    b12x.unfreeze_kernel_resolution()
    yield
    b12x.unfreeze_kernel_resolution()


def _moe_plan(max_tokens, activation="silu"):
    p = fused_moe.plan_weights(quant_modes="w4a16", source_format="modelopt_nvfp4",
                               activation=activation, params_dtype="bfloat16", num_experts=4,
                               hidden_size=64, intermediate_size=32, w13_layout="w31")
    return fused_moe.plan(fused_moe.Caps(max_tokens=max_tokens, num_topk=2, weight_plan=p))


def test_registry_records_plans_and_freeze_names_the_shape():
    b12x.clear_resolved_kernels()
    assert b12x.resolved_kernels() == []
    _moe_plan(3)
    r = b12x.resolved_kernels()
    assert len(r) == 1
    assert r[0]["op"] == "fused_moe.plan"
    assert r[0]["signature"].startswith("moe.w4a16 src=modelopt_nvfp4 act=silu io=bf16")
    assert "max_tokens=3" in r[0]["shape"] and r[0]["plans"] == 1
    b12x.freeze_kernel_resolution("pytest")
    _moe_plan(3)  # the same signature keeps planning
    assert b12x.resolved_kernels()[0]["plans"] == 2
    with pytest.raises(b12x.KernelResolutionFrozenError) as e:
        _moe_plan(5, activation="relu2")
    msg = str(e.value)
    for part in ("fused_moe.plan", "E=4 H=64 I=32 max_tokens=5 topk=2", "act=relu2", "frozen",
                 "pytest"):
        assert part in msg, msg
    assert len(b12x.resolved_kernels()) == 1  # the refused plan recorded nothing
    b12x.unfreeze_kernel_resolution()
    _moe_plan(5, activation="relu2")
    assert len(b12x.resolved_kernels()) == 2
    b12x.clear_resolved_kernels()


def test_warmup_rejects_bad_descriptions():
    lin = {"kind": "linear", "format": "q8_0", "in_features": 256, "out_features": 256}
    with pytest.raises(_capi.InvalidArgumentError, match=r"layers\[0\]\.kind='conv'"):
        b12x.warmup([{"kind": "conv"}], [1])
    with pytest.raises(_capi.InvalidArgumentError, match=r"layers\[0\] has unknown key 'in_feature'"):
        b12x.warmup([{"kind": "linear", "format": "q8_0", "in_feature": 256,
                      "in_features": 256, "out_features": 256}], [1])
    with pytest.raises(_capi.InvalidArgumentError, match=r"layers\[1\]\.num_topk is required"):
        b12x.warmup([lin, {"kind": "moe", "quant_mode": "w4a16",
                           "source_format": "modelopt_nvfp4", "num_experts": 4,
                           "hidden_size": 64, "intermediate_size": 32}], [1])
    with pytest.raises(_capi.InvalidArgumentError, match=r"token_counts\[1\]=0"):
        b12x.warmup([lin], [1, 0])
    with pytest.raises(_capi.InvalidArgumentError, match="token_counts must hold"):
        b12x.warmup([lin], [])
    with pytest.raises(_capi.InvalidArgumentError, match="unknown dtype name 'bf17'"):
        b12x.warmup([dict(lin, act_dtype="bf17")], [1])
    with pytest.raises(_capi.InvalidArgumentError, match="mode='prefill'"):
        b12x.warmup([{"kind": "attention", "mode": "prefill", "num_q_heads": 8,
                      "num_kv_heads": 2, "head_dim_qk": 128, "page_size": 16,
                      "max_page_table_width": 8}], [1])


needs_gpu = pytest.mark.skipif(b12x.device_count() == 0, reason="needs a CUDA device")


@needs_gpu
def test_warmup_then_freeze_on_gpu():
    layers = [
        {"kind": "linear", "name": "o", "format": "nvfp4_w4a16", "in_features": 512,
         "out_features": 256},
        {"kind": "linear", "name": "qkv", "format": "nvfp4_w4a16", "in_features": 512,
         "out_features": 768},
        {"kind": "moe", "name": "experts", "quant_mode": "ggml_a16", "source_format": "ggml",
         "ggml_w1_dtype": "q8_0", "ggml_w2_dtype": "q8_0", "num_experts": 8, "hidden_size": 256,
         "intermediate_size": 128, "num_topk": 2},
        {"kind": "attention", "name": "attn", "num_q_heads": 8, "num_kv_heads": 2,
         "head_dim_qk": 128, "page_size": 16, "max_page_table_width": 64, "max_batch": 8},
        {"kind": "embedding", "name": "embed", "vocab": 1000, "dim": 256},
    ]
    counts = [1, 8, 64]
    # Other tests of this process planned kernels too: only this warm-up's count as resolved.
    b12x.clear_resolved_kernels()
    r = b12x.warmup(layers, counts)
    assert r["planned"] == len(layers) * len(counts)
    assert len(r["entries"]) == r["planned"]
    sigs = {e["signature"] for e in r["entries"]}
    assert r["unique"] == len(sigs) < r["planned"]
    assert r["launched"] + r["already_warm"] == r["unique"]
    launched = [e["signature"] for e in r["entries"] if e["launched"]]
    assert len(launched) == len(set(launched)) == r["launched"]
    by = {(e["layer"], e["tokens"]): e["signature"] for e in r["entries"]}
    assert by[("o", 1)] == by[("qkv", 1)]
    again = b12x.warmup(layers, counts)
    assert again["launched"] == 0 and again["already_warm"] == r["unique"]

    b12x.freeze_kernel_resolution("serving")
    assert b12x.warmup(layers, counts)["launched"] == 0  # warmed shapes still plan
    with pytest.raises(b12x.KernelResolutionFrozenError, match="gemm::plan.*N=256 K=256"):
        b12x.warmup([{"kind": "linear", "format": "iq2_xxs", "in_features": 256,
                      "out_features": 256, "out_dtype": "fp16"}], [3])
    b12x.unfreeze_kernel_resolution()
    b12x.warmup([{"kind": "linear", "format": "iq2_xxs", "in_features": 256,
                  "out_features": 256, "out_dtype": "fp16"}], [3])


# ---- checkpoint round trip on the GPU ------------------------------------------------------------

def _bf16_bits(x):
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def _bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


# (format, --layers, expected dense path, weight error bound: loose rel_l2 vs the BF16 weights)
_CASES = [
    ("nvfp4", "nvfp4_w4a16", 0.15),  # no input amax: a W4A16 checkpoint
    ("mxfp8", "mxfp8", 0.08),
    ("q8_0", "q8_0", 0.02),
    ("iq2_xs", "iq2_xs", 0.60),
]


@pytest.mark.parametrize("fmt,gemm_fmt,loose", _CASES, ids=[c[0] for c in _CASES])
def test_checkpoint_round_trip_on_gpu(tmp_path, cuda_torch, fmt, gemm_fmt, loose):
    torch = cuda_torch
    rng = np.random.default_rng()
    src, out = tmp_path / "bf16", tmp_path / "q"
    os.makedirs(src)
    w = rng.standard_normal((256, 512)).astype(np.float32) * 0.02
    w.flat[::97] *= 8  # outliers
    wb = _bf16_bits(w)
    ck.save_safetensors(src / "model.safetensors",
                        {"model.layers.0.self_attn.o_proj.weight": ("BF16", wb),
                         "model.norm.weight": ("BF16", _bf16_bits(np.ones(256)))})
    (src / "config.json").write_text(json.dumps({"hidden_size": 256, "num_attention_heads": 4,
                                                 "torch_dtype": "bfloat16"}))
    rep = ck.quantize(src, out, fmt, layers=["o_proj$"])
    assert [l["name"] for l in rep["layers"]] == ["model.layers.0.self_attn.o_proj"]

    cc, _, _ = _device_cc()
    ins = ck.inspect(out, compute_capability=cc)
    layer = next(l for l in ins["layers"] if l["name"] == "model.layers.0.self_attn.o_proj")
    assert layer["selection"]["supported"], layer
    assert ck.gemm_format_for_path(layer["selection"]["path"]) == gemm_fmt

    lay = ck.load_linear(out, "model.layers.0.self_attn.o_proj", cc)
    packed = ck.pack_linear(lay, device=0)
    assert packed.format == gemm_fmt and packed.out_features == 256 and packed.in_features == 512

    for m in (3, 40):
        x = torch.randn(m, 512, dtype=torch.bfloat16, device="cuda")
        y = b12x.gemm.linear(x, packed).float().cpu().numpy()
        xb = x.view(torch.int16).cpu().numpy().view(np.uint16)
        weight = lay.tensors["weight"]
        if gemm_fmt in ("q8_0", "iq2_xs"):
            weight = weight.reshape(weight.shape[0], -1)
        ref = b12x.gemm.reference_linear(
            gemm_fmt, weight, lay.tensors.get("weight_scale"), xb,
            global_scale=lay.weight_scale_2 if gemm_fmt == "nvfp4_w4a16" else 1.0)
        rms = np.sqrt(np.mean(ref ** 2))
        assert np.all(np.isfinite(y))
        assert np.all(np.abs(y - ref) <= np.abs(ref) / 128 + 1e-3 * rms), \
            f"{fmt} M={m}: max err {np.max(np.abs(y - ref))}"
        full = _bf16_to_f32(xb).astype(np.float64) @ _bf16_to_f32(wb).astype(np.float64).T
        rel = np.linalg.norm(y - full) / np.linalg.norm(full)
        assert 0 < rel < loose, f"{fmt} M={m}: rel_l2 vs bf16 weights {rel}"


def _device_cc():
    import ctypes
    cc, sms, ok = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
    _capi.call("b12x_device_query", ctypes.c_int32(0), ctypes.byref(cc), ctypes.byref(sms),
               ctypes.byref(ok), None, ctypes.c_size_t(0))
    return cc.value, sms.value, ok.value


def _moe_checkpoint(tmp_path, rng):
    """BF16 checkpoint of one 4-expert MoE layer (H = I = 256) and its router; returns the dir
    and the float32 weights by name."""
    src = tmp_path / "moe_bf16"
    os.makedirs(src)
    tensors, w = {}, {}
    for e in range(4):
        for p in ("gate_proj", "up_proj", "down_proj"):
            name = f"model.layers.0.mlp.experts.{e}.{p}.weight"
            v = rng.standard_normal((256, 256)).astype(np.float32) * 0.02
            bits = _bf16_bits(v)
            tensors[name] = ("BF16", bits)
            w[name] = _bf16_to_f32(bits)
    tensors["model.layers.0.mlp.gate.weight"] = ("BF16", _bf16_bits(rng.standard_normal((4, 256))))
    ck.save_safetensors(src / "model.safetensors", tensors)
    (src / "config.json").write_text(json.dumps({"hidden_size": 256, "num_attention_heads": 4,
                                                 "num_experts_per_tok": 2}))
    return src, w


_MOE = "model.layers.0.mlp.experts"


def test_load_moe_on_cpu(tmp_path):
    src, w = _moe_checkpoint(tmp_path, np.random.default_rng())
    ck.quantize(src, tmp_path / "q", "q8_0")
    layer = ck.load_moe(tmp_path / "q", _MOE, topk=2, compute_capability=120)
    assert layer.selection["supported"] and layer.selection["path"] == "moe.ggml_a16"
    assert (layer.num_experts, layer.hidden, layer.intermediate, layer.gated) == (4, 256, 256, True)
    assert layer.plan["quant_mode"] == "ggml_a16" and layer.plan["w13_layout"] == "w31"
    w1 = layer.tensors["w1"]
    assert w1.shape == (4, 512, 256 // 32 * 34) and w1.dtype == np.uint8
    # FC1 rows are [gate; up] per expert: expert 1's up rows are up_proj's Q8_0 blocks.
    up1 = ck.open_safetensors(tmp_path / "q" / "model.safetensors")[f"{_MOE}.1.up_proj.weight"]
    np.testing.assert_array_equal(w1[1, 256:].reshape(-1), np.asarray(up1).reshape(-1))
    del layer
    import gc
    gc.collect()
    np.testing.assert_array_equal(w1[1, 256:].reshape(-1), np.asarray(up1).reshape(-1))
    with pytest.raises(_capi.UnsupportedError):
        ck.load_moe(src, _MOE, topk=2)  # BF16 experts: no fused-MoE path
    with pytest.raises(_capi.InvalidArgumentError, match="activation='tanh'"):
        ck.load_moe(tmp_path / "q", _MOE, activation="tanh")


@pytest.mark.parametrize("fmt,mode,loose", [("nvfp4", "w4a16", 0.35), ("q8_0", "ggml_a16", 0.05)])
def test_moe_checkpoint_round_trip_on_gpu(tmp_path, cuda_torch, fmt, mode, loose):
    torch = cuda_torch
    from b12x.moe import fused_moe as fm
    rng = np.random.default_rng()
    src, w = _moe_checkpoint(tmp_path, rng)
    ck.quantize(src, tmp_path / "q", fmt)
    cc, _, _ = _device_cc()
    ins = ck.inspect(tmp_path / "q", compute_capability=cc)
    lay = next(l for l in ins["layers"] if l["name"] == _MOE)
    assert lay["selection"]["path"] == "moe." + mode, lay
    layer = ck.load_moe(tmp_path / "q", _MOE, topk=2, compute_capability=cc)
    plan, experts = ck.prepare_moe(layer, device=0)
    for m in (5, 80, 600):  # decode (FP4: 160 routes take the wide routing) and grouped
        x = torch.randn(m, 256, dtype=torch.bfloat16, device="cuda")
        ids = torch.randint(0, 4, (m, 2), dtype=torch.int32, device="cuda")
        wts = torch.rand(m, 2, dtype=torch.float32, device="cuda") + 0.1
        p = fm.plan(fm.Caps(max_tokens=m, num_topk=2, weight_plan=plan))
        scratch = torch.empty(max(p.scratch_bytes, 1), dtype=torch.uint8, device="cuda")
        out = torch.full_like(x, float("nan"))
        fm.run(fm.bind(p, scratch=scratch, a=x, experts=experts, topk_weights=wts, topk_ids=ids,
                       output=out))
        torch.cuda.synchronize()
        got = out.float().cpu().numpy()
        xb = x.view(torch.int16).cpu().numpy().view(np.uint16)
        idn, wn = ids.cpu().numpy(), wts.cpu().numpy()
        t = layer.tensors
        ref = fm.reference(weight_plan=plan, a=xb, topk_ids=idn, topk_weights=wn, w1=t["w1"],
                           w2=t["w2"], w1_blockscale=t.get("w1_scale"),
                           w2_blockscale=t.get("w2_scale"),
                           w1_global_scale=t.get("w1_global_scale"),
                           w2_global_scale=t.get("w2_global_scale"))
        assert np.all(np.isfinite(got))
        assert np.max(np.abs(got - ref)) <= 0.02 * np.max(np.abs(ref)) + 1e-6
        # silu(gate x) * (up x) -> down with the original BF16 weights, top-k weighted.
        xf = _bf16_to_f32(xb).astype(np.float64)
        full = np.zeros_like(xf)
        for i in range(m):
            for k in range(2):
                pre = f"{_MOE}.{idn[i, k]}."
                g = w[pre + "gate_proj.weight"] @ xf[i]
                u = w[pre + "up_proj.weight"] @ xf[i]
                full[i] += wn[i, k] * (w[pre + "down_proj.weight"] @ (g / (1 + np.exp(-g)) * u))
        rel = np.linalg.norm(got - full) / np.linalg.norm(full)
        assert 0 < rel < loose, f"{fmt} M={m}: rel_l2 vs bf16 weights {rel}"
