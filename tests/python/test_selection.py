"""b12x.selection against the contract's rules (vllm-contract §1.1, §1.3-1.5)."""

import pytest

from b12x import selection as sel
from b12x import B12xError

MOE = dict(hidden=4096, intermediate_per_rank=1024, num_experts=64, topk=8, activation="silu",
           compute_capability=120, force_a16=False)


@pytest.mark.parametrize("weight,act,mode,layout", [
    ("mxfp4", "mxfp8", "w4a8_mx", "w31"), ("mxfp4", "bf16", "w4a16", "w31"),
    ("nvfp4", "nvfp4", "nvfp4", "w31"), ("nvfp4", "mxfp8", "w4a8_nvfp4", "w31"),
    ("nvfp4", "bf16", "w4a16", "w13")])
def test_moe_mode_table(weight, act, mode, layout):
    s = sel.select("moe", weight=weight, act=act, **MOE)
    assert s.supported and s.moe_quant_mode == mode and s.w13_layout == layout
    assert s.path == "moe." + mode


def test_mxfp4_prefers_a8_and_falls_back():
    assert sel.select("moe", weight="mxfp4", **MOE).moe_quant_mode == "w4a8_mx"
    s = sel.select("moe", weight="mxfp4", **{**MOE, "hidden": 2880})
    assert s.supported and s.moe_quant_mode == "w4a16"
    assert any("2880" in n for n in s.notes)


def test_force_a16_env(monkeypatch):
    for var in ("B12X_MOE_FP4_FORCE_A16", "VLLM_B12X_MOE_FP4_FORCE_A16"):
        monkeypatch.delenv(var, raising=False)
    args = {k: v for k, v in MOE.items() if k != "force_a16"}
    assert sel.select("moe", weight="nvfp4", act="nvfp4", **args).moe_quant_mode == "nvfp4"
    monkeypatch.setenv("VLLM_B12X_MOE_FP4_FORCE_A16", "1")
    for w in ("nvfp4", "mxfp4"):
        assert sel.select("moe", weight=w, **args).moe_quant_mode == "w4a16"
    assert sel.select("moe", weight="nvfp4", force_a16=False, **args).moe_quant_mode == "nvfp4"


def test_moe_reasons_all_listed():
    ok, reason = sel.is_supported("moe", weight="nvfp4", ep_size=2, has_bias=True,
                                  has_lora=True, has_expert_map=True,
                                  **{**MOE, "activation": "swigluoai"})
    assert not ok
    for frag in ("expert parallelism", "biases", "LoRA", "expert map", "interleaved"):
        assert frag in reason
    assert not sel.select("moe", weight="exl3", **MOE).supported
    assert not sel.select("moe", weight="nf3", **MOE).supported


def test_dense_paths_and_overrides(monkeypatch):
    for var in ("B12X_USE_FP4_GEMM", "VLLM_USE_B12X_FP4_GEMM", "B12X_USE_FP8_GEMM",
                "VLLM_USE_B12X_FP8_GEMM"):
        monkeypatch.delenv(var, raising=False)
    s = sel.select("linear", weight="nvfp4", n=4096, k=4096, compute_capability=121)
    assert s.path == "gemm.nvfp4_w4a4" and not s.b12x_first
    assert s.auto_order[s.auto_position] == "b12x"
    assert s.auto_position < s.auto_order.index("emulation")
    assert s.auto_position > s.auto_order.index("marlin")
    monkeypatch.setenv("VLLM_USE_B12X_FP4_GEMM", "1")
    s = sel.select("linear", weight="nvfp4", n=4096, k=4096, compute_capability=121)
    assert s.b12x_first and s.auto_order[0] == "b12x"
    s = sel.select("linear", weight="fp8_block", act="fp8_dynamic", n=4096, k=4096)
    assert s.path == "gemm.fp8_block" and not s.b12x_first
    assert sel.select("linear", weight="fp8_block", n=4096, k=4096, use_fp8_gemm=True).b12x_first
    s = sel.select("linear", weight="nvfp4", act="bf16", n=64, k=64)
    assert s.path == "gemm.nvfp4_w4a16"
    assert sel.select("linear", weight="q8_0", n=64, k=64).path == "gemm.q8_0"
    assert not sel.select("linear", weight="iq2_xs", n=64, k=128)


def test_devices_and_attention():
    assert sel.select("linear", weight="mxfp8", n=64, k=64, compute_capability=89).arch \
        == "portable"
    s = sel.select("linear", weight="mxfp8", n=64, k=64, compute_capability=80)
    assert not s.supported and "not served" in s.reason()
    a = dict(num_q_heads=32, num_kv_heads=8, head_dim=128, page_size=64, compute_capability=120)
    assert sel.select("attention", **a).path == "attention.paged"
    assert sel.select("attention", weight="fp8", **a)
    assert not sel.select("attention", weight="fp16", **a)
    assert not sel.select("attention", **{**a, "page_size": 16})
    assert not sel.select("attention", alibi=True, **a)
    assert sel.select("embedding", weight="q8_0", n=1000, k=4096).path == "embedding.q8_0"


def test_bad_names():
    with pytest.raises(B12xError):
        sel.select("moe", weight="nvfp5")
    with pytest.raises(B12xError):
        sel.select("conv")
