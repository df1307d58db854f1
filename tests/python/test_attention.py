"""b12x.attention.paged: numpy reference through the C ABI (CPU, CI), argument errors, and on a
GPU with torch: plan/bind/run against the reference (decode, extend, FP8 KV, vLLM-style strided
[N, 2, page, Hkv, D] cache), CUDA-graph replay with metadata changed in place, append_kv."""

import math

import numpy as np
import pytest

import b12x
from b12x import _capi
from b12x.attention import paged


def bf16_bits(x):
    """float32 -> bf16 bit patterns (round to nearest even) as uint16."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return r


def bf16_value(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def test_reference_decode_closed_form():
    D = 64
    q = bf16_bits(np.zeros((1, 1, D), np.float32))
    q[0, 0, 0] = bf16_bits(np.float32(2.0))
    k = bf16_bits(np.zeros((4, 4, 1, D), np.float32))
    v = bf16_bits(np.zeros((4, 4, 1, D), np.float32))
    table = np.array([[3, 0]], np.int32)
    k[3, 0, 0, 0] = bf16_bits(np.float32(3.0))          # key 0 = 3 e0, key 1 = 0
    v[3, 0, 0, :] = bf16_bits(np.arange(D, dtype=np.float32))
    v[3, 1, 0, :] = bf16_bits(np.float32(-1.0))
    out, lse = paged.reference(q, k, v, table, np.array([2], np.int32), np.array([0, 1], np.int32))
    s0 = 6.0 / 8.0
    w0 = math.exp(s0) / (math.exp(s0) + 1)
    np.testing.assert_allclose(out[0, 0], w0 * np.arange(D) - (1 - w0), atol=1e-12)
    assert abs(lse[0, 0] - math.log2(math.exp(s0) + 1)) < 1e-12


def test_reference_sink_and_window():
    D = 64
    q = bf16_bits(np.zeros((2, 1, D), np.float32))
    k = bf16_bits(np.zeros((2, 4, 1, D), np.float32))
    v = bf16_bits(np.zeros((2, 4, 1, D), np.float32))
    for j in range(5):
        v[j // 4, j % 4, 0, :] = bf16_bits(np.float32(j + 1))
    table = np.array([[0, 1]], np.int32)
    out, _ = paged.reference(q, k, v, table, np.array([5], np.int32), np.array([0, 2], np.int32),
                             window_left=1)
    assert out[0, 0, 0] == pytest.approx(3.5)
    assert out[1, 0, 0] == pytest.approx(4.5)
    sink = np.array([math.log(2.0)], np.float32)
    out, lse = paged.reference(q, k, v, table, np.array([5], np.int32),
                               np.array([0, 2], np.int32), attention_sink_bias=sink)
    assert out[1, 0, 0] == pytest.approx(15.0 / 7.0, rel=1e-6)
    assert lse[1, 0] == pytest.approx(math.log2(7.0), rel=1e-6)


def test_reference_rejects_bad_page_id():
    D = 64
    q = bf16_bits(np.zeros((1, 1, D), np.float32))
    k = bf16_bits(np.zeros((2, 4, 1, D), np.float32))
    table = np.array([[7]], np.int32)
    with pytest.raises(b12x.InvalidArgumentError, match="page_table"):
        paged.reference(q, k, k, table, np.array([3], np.int32), np.array([0, 1], np.int32))


def test_caps_errors():
    with pytest.raises(b12x.InvalidArgumentError, match="mode"):
        paged.Caps(mode="prefill", num_q_heads=8, num_kv_heads=2, head_dim_qk=128)._to_c()
    with pytest.raises(b12x.InvalidArgumentError, match="head dims"):
        paged.plan(paged.Caps(mode="decode", num_q_heads=8, num_kv_heads=2, head_dim_qk=96,
                              page_size=64, max_total_q=4, max_batch=4, max_page_table_width=8))
    with pytest.raises(b12x.InvalidArgumentError, match="kv_dtype"):
        paged.Caps(kv_dtype="int4")._to_c()


def test_caps_kv_prefix_stable():
    """The vLLM-facing Caps promise a stable K/V prefix by default (early K/V copies); it goes to
    the C ABI as a plan_create_ex flag, the caps struct keeps its layout."""
    assert paged.Caps()._flags() == paged.KV_PREFIX_STABLE == 1
    assert paged.Caps(kv_prefix_stable=False)._flags() == 0
    assert paged._CCaps._fields_[-1][0] == "use_cuda_graph"


# ---- GPU --------------------------------------------------------------------------------------
def _torch_to_np(t, torch):
    if t.dtype == torch.bfloat16:
        return t.contiguous().cpu().view(torch.int16).numpy().view(np.uint16)
    if t.element_size() == 1:
        return t.contiguous().cpu().view(torch.uint8).numpy()
    return t.contiguous().cpu().numpy()


def _problem(torch, *, mode, B, hq, hkv, D, page, qlens, prefix, fp8=False, sinks=False,
             window=-1, combined=True):
    dev = "cuda"
    lens = [p + q for p, q in zip(prefix, qlens)]
    npg = [(x + page - 1) // page for x in lens]
    W = max(npg) + 1
    pool = sum(npg) + 4
    perm = torch.randperm(pool)[: sum(npg)].tolist()
    table = torch.full((B, W), -9, dtype=torch.int32)
    i = 0
    for b in range(B):
        for j in range(npg[b]):
            table[b, j] = perm[i]
            i += 1
    kv_dtype = torch.float8_e4m3fn if fp8 else torch.bfloat16
    if combined:
        cache = (torch.randn(pool, 2, page, hkv, D, device=dev) * (3 if fp8 else 1)).to(kv_dtype)
        k_cache, v_cache = cache[:, 0], cache[:, 1]
    else:
        k_cache = (torch.randn(pool, page, hkv, D, device=dev)).to(kv_dtype)
        v_cache = (torch.randn(pool, page, hkv, D, device=dev)).to(kv_dtype)
    T = sum(qlens)
    q = torch.randn(T, hq, D, device=dev, dtype=torch.bfloat16)
    out = torch.full((T, hq, D), float("nan"), device=dev, dtype=torch.bfloat16)
    cu = torch.tensor([0] + list(np.cumsum(qlens)), dtype=torch.int32, device=dev)
    seq = torch.tensor(lens, dtype=torch.int32, device=dev)
    kd = (torch.rand(B, device=dev) * 0.4 + 0.1) if fp8 else None
    vd = (torch.rand(B, device=dev) * 0.4 + 0.1) if fp8 else None
    sk = torch.randn(hq, device=dev) if sinks else None
    return dict(q=q, k_cache=k_cache, v_cache=v_cache, out=out, table=table.to(dev), seq=seq,
                cu=cu, kd=kd, vd=vd, sinks=sk, window=window, W=W, T=T, fp8=fp8)


def _reference_of(torch, p):
    ref_out, ref_lse = paged.reference(
        _torch_to_np(p["q"], torch), _torch_to_np(p["k_cache"], torch),
        _torch_to_np(p["v_cache"], torch), p["table"].cpu().numpy(), p["seq"].cpu().numpy(),
        p["cu"].cpu().numpy(), window_left=p["window"],
        k_descale=None if p["kd"] is None else p["kd"].cpu().numpy(),
        v_descale=None if p["vd"] is None else p["vd"].cpu().numpy(),
        attention_sink_bias=None if p["sinks"] is None else p["sinks"].cpu().numpy(),
        kv_fp8=p["fp8"])
    return ref_out, ref_lse


def _plan_for(torch, p, mode, B, hq, hkv, D, page):
    caps = paged.Caps(device=p["q"].device, mode=mode, dtype=torch.bfloat16,
                      kv_dtype=p["k_cache"].dtype, num_q_heads=hq, num_kv_heads=hkv,
                      head_dim_qk=D, head_dim_vo=D, page_size=page, max_total_q=p["T"],
                      max_batch=B, max_page_table_width=p["W"], use_cuda_graph=True)
    pl = paged.plan(caps)
    scratch = torch.empty(pl.layout.nbytes, dtype=torch.uint8, device="cuda")
    return pl, scratch


def _bind(pl, scratch, p):
    return pl.bind(scratch, p["q"], p["k_cache"], p["v_cache"], p["out"], p["table"], p["seq"],
                   p["cu"], window_left=p["window"], k_descale=p["kd"], v_descale=p["vd"],
                   attention_sink_bias=p["sinks"])


@pytest.mark.parametrize("mode,fp8,sinks,window,combined", [
    ("decode", False, False, -1, True), ("decode", True, True, 70, True),
    ("extend", False, True, -1, False), ("extend", True, False, 33, True)])
def test_gpu_matches_reference(cuda_torch, mode, fp8, sinks, window, combined):
    torch = cuda_torch
    if not paged.is_supported():
        pytest.skip("device not in the compiled architectures")
    B, hq, hkv, D, page = 3, 16, 4, 128, 64
    qlens = [1, 1, 1] if mode == "decode" else [5, 1, 40]
    prefix = [0, 700, 1300]
    p = _problem(torch, mode=mode, B=B, hq=hq, hkv=hkv, D=D, page=page, qlens=qlens,
                 prefix=prefix, fp8=fp8, sinks=sinks, window=window, combined=combined)
    pl, scratch = _plan_for(torch, p, mode, B, hq, hkv, D, page)
    binding = _bind(pl, scratch, p)
    paged.compile(binding)
    out, lse = paged.run(binding=binding)
    torch.cuda.synchronize()
    ref_out, ref_lse = _reference_of(torch, p)
    got = out.float().cpu().numpy()
    assert np.isfinite(got).all()
    assert np.abs(got - ref_out).max() < 1.2e-2 * max(1.0, np.abs(ref_out).max())
    assert np.abs(lse.cpu().numpy() - ref_lse).max() < 1e-2


def test_gpu_graph_replay_with_new_metadata(cuda_torch):
    torch = cuda_torch
    if not paged.is_supported():
        pytest.skip("device not in the compiled architectures")
    B, hq, hkv, D, page = 4, 8, 2, 128, 64
    p = _problem(torch, mode="decode", B=B, hq=hq, hkv=hkv, D=D, page=page, qlens=[1] * B,
                 prefix=[900] * B, sinks=True)
    pl, scratch = _plan_for(torch, p, "decode", B, hq, hkv, D, page)
    pl.prepare_decode_graph_replay_state(B, p["W"], total_q_capacity=B)
    binding = _bind(pl, scratch, p)
    paged.run(binding=binding)  # warm up outside capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        paged.run(binding=binding)
    with pytest.raises(b12x.CaptureActiveError):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            pl.prepare_decode_graph_replay_state(B, p["W"])
    for rep in range(5):
        new = torch.randint(1, 900, (B,), dtype=torch.int32)
        p["seq"].copy_(new.cuda())
        rows = p["table"][:, :-1].clone()
        p["table"][:, :-1] = rows[:, torch.randperm(rows.shape[1])]
        p["out"].fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        ref_out, _ = _reference_of(torch, p)
        err = np.abs(p["out"].float().cpu().numpy() - ref_out).max()
        assert err < 1.2e-2 * max(1.0, np.abs(ref_out).max()), rep


def test_gpu_append_kv_fp8(cuda_torch):
    torch = cuda_torch
    if not paged.is_supported():
        pytest.skip("device not in the compiled architectures")
    T, H, D, P, S = 9, 2, 64, 6, 16
    key = torch.randn(T, H, D, device="cuda", dtype=torch.bfloat16)
    val = torch.randn(T, H, D, device="cuda", dtype=torch.bfloat16)
    kc = torch.zeros(P, S, H, D, device="cuda", dtype=torch.float8_e4m3fn)
    vc = torch.zeros(P, S, H, D, device="cuda", dtype=torch.float8_e4m3fn)
    slots = torch.randperm(P * S)[:T].to(torch.int64).cuda()
    ks = torch.tensor([0.05], device="cuda")
    vs = torch.tensor([0.02], device="cuda")
    paged.append_kv(key, val, kc, vc, slots, ks, vs)
    torch.cuda.synchronize()
    page, off = slots // S, slots % S
    expect_k = (key.float() / ks).to(torch.float8_e4m3fn)
    assert torch.equal(kc[page, off].view(torch.uint8), expect_k.view(torch.uint8))
    expect_v = (val.float() / vs).to(torch.float8_e4m3fn)
    assert torch.equal(vc[page, off].view(torch.uint8), expect_v.view(torch.uint8))


def test_gpu_custom_op_matches_run(cuda_torch):
    torch = cuda_torch
    if not paged.is_supported():
        pytest.skip("device not in the compiled architectures")
    if not hasattr(torch.ops.b12x, "paged_attention"):
        pytest.skip("torch custom op not registered in this torch build")
    B, hq, hkv, D, page = 2, 8, 2, 128, 64
    p = _problem(torch, mode="decode", B=B, hq=hq, hkv=hkv, D=D, page=page, qlens=[1] * B,
                 prefix=[300, 77], sinks=True)
    pl, scratch = _plan_for(torch, p, "decode", B, hq, hkv, D, page)
    out, _ = paged.run(binding=_bind(pl, scratch, p))
    expect = out.clone()
    p["out"].fill_(float("nan"))
    torch.ops.b12x.paged_attention(scratch, p["q"], p["k_cache"], p["v_cache"], p["out"],
                                   p["table"], p["seq"], p["cu"], None, None, p["sinks"], None,
                                   pl.handle, -1, 0.0, 0)
    torch.cuda.synchronize()
    assert torch.equal(p["out"], expect)
