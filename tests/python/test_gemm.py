"""Linear GEMM Python API: the numpy CPU reference against an independent numpy dequantization,
argument validation, and (with torch + CUDA) the GPU ops against the reference."""

import numpy as np
import pytest

import b12x
from b12x import gemm
from b12x.gemm import blockscaled, ggml, mxfp8_linear, tensor_fp8_linear

E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])


def e4m3(b):
    b = np.asarray(b, dtype=np.int64)
    s = np.where(b & 0x80, -1.0, 1.0)
    e = (b >> 3) & 0xF
    m = b & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7))
    return s * v


def bf16_bits(x):
    u = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_val(b):
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def nvfp4_dequant(w, s, gs):
    lo, hi = w & 0xF, w >> 4
    codes = np.stack([lo, hi], axis=-1).reshape(w.shape[0], -1)
    vals = E2M1[codes]
    return vals * np.repeat(e4m3(s), 16, axis=1) * gs


def test_reference_nvfp4_w4a16_matches_numpy():
    n, k, m = 24, 64, 3
    w = np.random.randint(0, 256, (n, k // 2), dtype=np.uint8)
    s = np.random.randint(0x20, 0x50, (n, k // 16)).astype(np.uint8)
    xb = bf16_bits(np.random.randn(m, k))
    ref = gemm.reference_linear("nvfp4_w4a16", w, s, xb, global_scale=0.25)
    want = bf16_val(xb) @ nvfp4_dequant(w, s, 0.25).T
    np.testing.assert_allclose(ref, want, rtol=1e-12, atol=1e-12)


def test_reference_fp8_block_and_bias():
    n, k, m = 130, 256, 2
    w = np.random.randint(0, 0x7E, (n, k), dtype=np.uint8)
    ws = np.random.uniform(0.01, 0.1, ((n + 127) // 128, k // 128)).astype(np.float32)
    xq = np.random.randint(0, 0x7E, (m, k), dtype=np.uint8)
    xs = np.random.uniform(0.01, 0.1, (m, k // 128)).astype(np.float32)
    bias = np.random.randn(n).astype(np.float32)
    ref = blockscaled.mm_block_fp8(xq, xs, w, ws) + 0  # numpy path: reference
    wd = e4m3(w) * np.repeat(np.repeat(ws, 128, axis=0)[:n], 128, axis=1)
    xd = e4m3(xq) * np.repeat(xs, 128, axis=1)
    np.testing.assert_allclose(ref, xd @ wd.T, rtol=1e-12)
    refb = gemm.reference_linear("fp8_block", w, ws, xq, x_scale=xs, bias=bias)
    np.testing.assert_allclose(refb, xd @ wd.T + bias, rtol=1e-9, atol=1e-9)


def test_reference_q8_0_matches_numpy():
    n, k, m = 5, 64, 2
    q = np.random.randint(-127, 128, (n, k)).astype(np.int8)
    d = np.random.uniform(0.01, 0.1, (n, k // 32)).astype(np.float16)
    rows = np.zeros((n, k // 32 * 34), dtype=np.uint8)
    for b in range(k // 32):
        rows[:, b * 34:b * 34 + 2] = d[:, b:b + 1].view(np.uint8).reshape(n, 2)
        rows[:, b * 34 + 2:b * 34 + 34] = q[:, b * 32:(b + 1) * 32].view(np.uint8)
    x = np.random.randn(m, k).astype(np.float16)
    ref = ggml.reference(x, rows, "q8_0")
    wd = q.astype(np.float64) * np.repeat(d.astype(np.float64), 32, axis=1)
    np.testing.assert_allclose(ref, x.astype(np.float64) @ wd.T, rtol=1e-12)


def test_reference_dequantize_shapes():
    w = np.random.randint(0, 256, (3, 74), dtype=np.uint8)
    w[:, 0:2] = np.array([0x00, 0x3C], dtype=np.uint8)  # d = 1.0
    d = gemm.reference_dequantize_weight("iq2_xs", w)
    assert d.shape == (3, 256)
    assert np.all(np.isfinite(d))


def test_bad_inputs_raise():
    w = np.zeros((4, 24), dtype=np.uint8)  # K = 48, not a multiple of 32
    s = np.zeros((4, 3), dtype=np.uint8)
    x = np.zeros((1, 48), dtype=np.float16)
    with pytest.raises(b12x.InvalidArgumentError, match="K=48"):
        gemm.reference_linear("nvfp4_w4a16", w, s, x)
    with pytest.raises(b12x.InvalidArgumentError, match="unknown format"):
        gemm.reference_linear("int4", w, s, x)
    with pytest.raises(ValueError, match="qtype"):
        ggml.pack_weight(np.zeros((1, 34), np.uint8), "q4_k")


def test_is_supported_returns_bool():
    assert isinstance(gemm.is_supported(), bool)
    assert isinstance(blockscaled.is_supported(), bool)


# ---- GPU (torch + CUDA) ---------------------------------------------------------------------
def _close(out, ref, rel=1 / 128):
    out = out.float().cpu().numpy().astype(np.float64)
    rms = np.sqrt(np.mean(ref ** 2))
    assert np.all(np.isfinite(out))
    assert np.all(np.abs(out - ref) <= rel * np.abs(ref) + 1e-3 * rms)


def test_gpu_nvfp4_w4a16_linear_and_graph(cuda_torch):
    torch = cuda_torch
    if not gemm.is_supported():
        pytest.skip("device not supported by this build")
    n, k = 256, 1024
    w = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8)
    s = torch.randint(0x20, 0x50, (n, k // 16), dtype=torch.uint8)
    packed = gemm.pack_weight("nvfp4_w4a16", w.cuda(), s.cuda(), global_scale=0.5)
    x = torch.randn(4, k, dtype=torch.bfloat16, device="cuda")
    bias = torch.randn(n, dtype=torch.bfloat16, device="cuda")
    y = gemm.linear(x, packed, bias=bias)
    ref = gemm.reference_linear("nvfp4_w4a16", w.numpy(), s.numpy(),
                                x.view(torch.int16).cpu().numpy().view(np.uint16),
                                global_scale=0.5, bias=bias.float().cpu().numpy())
    _close(y, ref)
    gemm.prewarm(packed, [4])
    out = torch.empty(4, n, dtype=torch.bfloat16, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        gemm.linear(x, packed, bias=bias, out=out)
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    ref2 = gemm.reference_linear("nvfp4_w4a16", w.numpy(), s.numpy(),
                                 x.view(torch.int16).cpu().numpy().view(np.uint16),
                                 global_scale=0.5, bias=bias.float().cpu().numpy())
    _close(out, ref2)


def test_gpu_blockscaled_nvfp4(cuda_torch):
    torch = cuda_torch
    if not gemm.is_supported():
        pytest.skip("device not supported by this build")
    from b12x._lib.intrinsics import swizzle_block_scale
    from b12x import quantization
    m, n, k = 3, 128, 512
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    gs = torch.tensor([448 * 6 / x.abs().max().item()], dtype=torch.float32, device="cuda")
    xq, xsf = quantization.quantize_nvfp4(x, gs)
    w = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device="cuda")
    ws = torch.randint(0x20, 0x50, (n, k // 16), dtype=torch.uint8, device="cuda")
    alpha = torch.tensor([0.5], dtype=torch.float32, device="cuda")
    y = blockscaled.mm_nvfp4(xq, xsf, w, swizzle_block_scale(ws), alpha)
    ref = blockscaled.mm_nvfp4(xq.cpu().numpy(), xsf.cpu().numpy().view(np.uint8).reshape(-1),
                               w.cpu().numpy(), swizzle_block_scale(ws.cpu().numpy()).reshape(-1),
                               0.5)
    _close(y, ref)


def test_gpu_mxfp8_and_tensor_fp8(cuda_torch):
    torch = cuda_torch
    if not gemm.is_supported():
        pytest.skip("device not supported by this build")
    n, k = 96, 256
    w = torch.randint(0, 0x7E, (n, k), dtype=torch.uint8)
    sc = torch.randint(118, 126, (n, k // 32), dtype=torch.uint8)
    packed = mxfp8_linear.pack_weight(w.cuda(), sc.cuda())
    assert packed.in_features == k and packed.out_features == n
    x = torch.randn(5, k, dtype=torch.bfloat16, device="cuda")
    y = mxfp8_linear.mm(x, packed)
    ref = gemm.reference_linear("mxfp8", w.numpy(), sc.numpy(),
                                x.view(torch.int16).cpu().numpy().view(np.uint16))
    _close(y, ref)
    os_ = torch.tensor([0.01], dtype=torch.float32)
    pt = tensor_fp8_linear.pack_weight(w.cuda(), os_.cuda())
    xq = torch.randint(0, 0x7E, (2, k), dtype=torch.uint8, device="cuda")
    tensor_fp8_linear.prewarm(pt, [2])
    y2 = tensor_fp8_linear.mm(xq, pt)
    ref2 = gemm.reference_linear("fp8_tensor", w.numpy(), None, xq.cpu().numpy(),
                                 output_scale=os_.numpy())
    _close(y2, ref2)
