"""b12x.moe.fused_moe: Python surface (numpy/CPU in CI; torch+GPU parts skip without them)."""

import math

import numpy as np
import pytest

from b12x import _capi
from b12x.moe import fused_moe


def _plan(**kw):
    args = dict(quant_modes="w4a16", source_format="modelopt_nvfp4", activation="relu2",
                params_dtype="bfloat16", num_experts=2, hidden_size=32, intermediate_size=32,
                w13_layout="w31")
    args.update(kw)
    return fused_moe.plan_weights(**args)


def _swizzle_offset(r, c, cols):
    tiles = (cols + 3) // 4
    return ((r // 128) * tiles + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4


def _nvfp4_source(E, rows, K, code_of_row, scale=0x38):
    w = np.zeros((E, rows, K // 2), dtype=np.uint8)
    for e in range(E):
        for r in range(rows):
            c = code_of_row(e, r)
            w[e, r, :] = c | (c << 4)
    r128, c4 = -(-rows // 128) * 128, -(-(K // 16) // 4) * 4
    s = np.zeros((E, r128, c4), dtype=np.uint8)
    flat = s.reshape(E, -1)
    for r in range(rows):
        for c in range(K // 16):
            flat[:, _swizzle_offset(r, c, K // 16)] = scale
    return w, s


def test_plan_weights_and_rejections():
    p = _plan()
    assert p.discards_source_parameters
    assert p.prepared_bytes > 0
    with pytest.raises(_capi.UnsupportedError, match="expert biases are not supported"):
        _plan(has_expert_bias=True)
    with pytest.raises(_capi.UnsupportedError, match="expert parallelism is not supported"):
        _plan(ep_size=2)
    with pytest.raises(_capi.UnsupportedError, match="expert maps are not supported"):
        _plan(expert_map=np.arange(2))
    with pytest.raises(_capi.InvalidArgumentError, match="w4a8_mx needs hidden % 256"):
        _plan(quant_modes="w4a8_mx", source_format="fp4_e8m0_k32", activation="silu",
              hidden_size=384, intermediate_size=64)
    with pytest.raises(_capi.InvalidArgumentError, match="not supported with quant_mode=w4a8_nvfp4"):
        _plan(quant_modes="w4a8_nvfp4", activation="swigluoai_uninterleave")
    with pytest.raises(_capi.InvalidArgumentError, match="supported: bf16, fp16|supported: bfloat16"):
        _plan(params_dtype="float32")
    with pytest.raises(_capi.InvalidArgumentError, match="activation='gelu' is unknown"):
        _plan(activation="gelu")


def test_caps_plan_scratch_and_execution():
    p = _plan(quant_modes="nvfp4", activation="silu", hidden_size=256, intermediate_size=128,
              num_experts=8)
    caps = fused_moe.Caps(max_tokens=4, num_topk=8, device=0, weight_plan=p, quant_mode="nvfp4")
    pl = fused_moe.plan(caps)
    specs = pl.scratch_specs()
    assert len(specs) == 1 and specs[0].shape == (pl.scratch_bytes,) and specs[0].nbytes > 0
    assert "uint8" in str(specs[0].dtype)
    e1 = fused_moe.plan_execution(4, 8, 0, p, "nvfp4")
    e2 = fused_moe.plan_execution(4096, 8, 0, p, "nvfp4")
    assert (e1.implementation, e1.execution) != (e2.implementation, e2.execution)
    hash((e1.implementation, e1.execution))
    with pytest.raises(_capi.InvalidArgumentError, match="apply_router_weight_on_input is only"):
        fused_moe.plan(fused_moe.Caps(max_tokens=4, num_topk=8, weight_plan=p,
                                      apply_router_weight_on_input=True))


def test_reference_relu2_hand_computed():
    E, H, I, M = 2, 32, 32, 2
    p = _plan()
    w1, s1 = _nvfp4_source(E, I, H, lambda e, r: (1 if r == 0 else 2) if e == 0 else 0xA)
    w2, s2 = _nvfp4_source(E, H, I, lambda e, r: 1 if e == 0 else 7)
    ones = np.ones(E, dtype=np.float32)
    x = np.full((M, H), 0x3F80, dtype=np.uint16)  # bf16 1.0
    ids = np.array([[0, 1], [-1, 9]], dtype=np.int32)
    wts = np.array([[0.5, 0.25], [1.0, 1.0]], dtype=np.float32)
    out = fused_moe.reference(weight_plan=p, a=x, topk_ids=ids, topk_weights=wts, w1=w1, w2=w2,
                              w1_blockscale=s1, w2_blockscale=s2, w1_global_scale=ones,
                              w2_global_scale=ones)
    np.testing.assert_array_equal(out[0], np.full(H, 8000.0, dtype=np.float32))
    np.testing.assert_array_equal(out[1], np.zeros(H, dtype=np.float32))


def _random_problem(torch, E=8, H=256, I=128, M=6, topk=4, mode="nvfp4", act="silu"):
    g = np.random.default_rng()
    gated = act != "relu2"
    rows = 2 * I if gated else I
    w1 = g.integers(0, 256, (E, rows, H // 2), dtype=np.uint8)
    w2 = g.integers(0, 256, (E, H, I // 2), dtype=np.uint8)
    _, s1 = _nvfp4_source(E, rows, H, lambda e, r: 0)
    _, s2 = _nvfp4_source(E, H, I, lambda e, r: 0)
    s1[:] = g.integers(0x28, 0x40, s1.shape, dtype=np.uint8)
    s2[:] = g.integers(0x28, 0x40, s2.shape, dtype=np.uint8)
    gs1 = np.full(E, 1 / 16, dtype=np.float32)
    gs2 = np.full(E, 1 / 16, dtype=np.float32)
    a1 = np.full(E, 2688 / 4.0, dtype=np.float32)
    a2 = np.full(E, 2688 / 2.0, dtype=np.float32)
    xf = torch.randn(M, H, dtype=torch.float32).to(torch.bfloat16)
    ids = g.integers(-1, E // 2, (M, topk)).astype(np.int32)
    wts = g.random((M, topk)).astype(np.float32)
    return dict(w1=w1, w2=w2, s1=s1, s2=s2, gs1=gs1, gs2=gs2, a1=a1, a2=a2, x=xf, ids=ids,
                wts=wts)


def test_gpu_matches_reference_and_graph_replay(cuda_torch):
    torch = cuda_torch
    if not fused_moe.is_supported(0):
        pytest.skip("device not supported by this build")
    E, H, I, M, topk = 8, 256, 128, 6, 4
    P = _random_problem(torch, E, H, I, M, topk)
    plan_w = _plan(quant_modes="nvfp4", activation="silu", num_experts=E, hidden_size=H,
                   intermediate_size=I)
    dev = torch.device("cuda:0")
    t = {k: torch.from_numpy(v).to(dev) for k, v in P.items() if isinstance(v, np.ndarray)}
    experts = fused_moe.prepare_weights(plan=plan_w, w1_fp4=t["w1"], w2_fp4=t["w2"],
                                        w1_blockscale=t["s1"], w2_blockscale=t["s2"],
                                        w1_global_scale=t["gs1"], w2_global_scale=t["gs2"],
                                        a1_gscale=t["a1"], a2_gscale=t["a2"],
                                        params_dtype=torch.bfloat16)
    pl = fused_moe.plan(fused_moe.Caps(max_tokens=M, num_topk=topk, device=dev,
                                       weight_plan=plan_w, quant_mode="nvfp4"))
    scratch = torch.empty(pl.scratch_specs()[0].shape, dtype=torch.uint8, device=dev)
    x = P["x"].to(dev)
    ids = t["ids"]
    wts = t["wts"]
    out = torch.full((M, H), float("nan"), dtype=torch.bfloat16, device=dev)
    b = fused_moe.bind(pl, scratch=scratch, a=x, experts=experts, topk_weights=wts,
                       topk_ids=ids, output=out)
    fused_moe.run(binding=b)
    torch.cuda.synchronize()

    def ref():
        xb = x.cpu().view(torch.int16).numpy().view(np.uint16)
        return fused_moe.reference(weight_plan=plan_w, a=xb, topk_ids=ids.cpu().numpy(),
                                   topk_weights=wts.cpu().numpy(), w1=P["w1"], w2=P["w2"],
                                   w1_blockscale=P["s1"], w2_blockscale=P["s2"],
                                   w1_global_scale=P["gs1"], w2_global_scale=P["gs2"],
                                   a1_gscale=P["a1"], a2_gscale=P["a2"])

    r = ref()
    o = out.float().cpu().numpy()
    cos = float((o * r).sum() / math.sqrt((o * o).sum() * (r * r).sum()))
    assert cos > 0.9999
    # Graph capture, then new routes in the same buffers: replay == eager, bit for bit.
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fused_moe.run(binding=b)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        fused_moe.run(binding=b)
    ids.copy_(torch.randint(-1, E, (M, topk), dtype=torch.int32, device=dev))
    wts.copy_(torch.rand(M, topk, device=dev))
    g.replay()
    torch.cuda.synchronize()
    replay = out.clone()
    fused_moe.run(binding=b)
    torch.cuda.synchronize()
    assert torch.equal(replay.view(torch.int16), out.view(torch.int16))
    r = ref()
    o = out.float().cpu().numpy()
    cos = float((o * r).sum() / math.sqrt((o * o).sum() * (r * r).sum()))
    assert cos > 0.9999
