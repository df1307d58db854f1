"""Activation quantisers from Python: the numpy (CPU reference) path against the independent
block codecs of ``b12x.formats`` (every format, swizzled grids and padding), the b12x module
surfaces (``nvfp4.plan/allocate_outputs/run``, ``mxfp8.quantize_rows``), validation errors, and
(with torch + CUDA) the GPU ops bit-exact against the reference, incl. CUDA-graph replay."""

import numpy as np
import pytest

import b12x
from b12x import formats
from b12x import quantization as q


def bf16_input(m, k, seed_spread=10.0):
    """bf16 bit patterns (uint16) with per-32-block magnitudes over many binades, zero blocks."""
    x = np.random.randn(m, k).astype(np.float32)
    nb = (k + 31) // 32
    mag = np.exp2(np.random.uniform(-seed_spread, seed_spread, size=(m, nb))).astype(np.float32)
    mag[np.random.rand(m, nb) < 0.05] = 0.0
    x *= np.repeat(mag, 32, axis=1)[:, :k]
    return formats.encode_scalar("bf16", x)


def as_f32(xb):
    return formats.decode_scalar("bf16", xb)


SHAPES = [(1, 128), (3, 64), (129, 256), (200, 4096 + 128)]


@pytest.mark.parametrize("m,k", SHAPES)
def test_nvfp4_matches_formats(m, k):
    xb = bf16_input(m, k)
    gs = formats.nvfp4_global_scale(as_f32(xb))
    packed, sw = q.quantize_nvfp4(xb, gs)
    p2, s2, _ = formats.quantize_nvfp4(as_f32(xb), gs)
    np.testing.assert_array_equal(packed, p2)
    np.testing.assert_array_equal(sw, formats.swizzle_block_scale(s2, pad=0))
    assert sw.shape == (-(-m // 128) * 128, -(-(k // 16) // 4) * 4)


@pytest.mark.parametrize("m,k", SHAPES)
def test_mxfp8_matches_formats(m, k):
    xb = bf16_input(m, k)
    values, rows, sw = q.quantize_mxfp8(xb)
    v2, s2 = formats.quantize_mxfp8(as_f32(xb), zero_block_scale=127)
    np.testing.assert_array_equal(values, v2)
    np.testing.assert_array_equal(rows, s2)
    np.testing.assert_array_equal(sw, formats.swizzle_block_scale(s2, pad=127))


@pytest.mark.parametrize("m,k", SHAPES)
def test_mxfp4_ceil_rule_matches_formats(m, k):
    xb = bf16_input(m, k)
    packed, sw = q.quantize_mxfp4(xb)
    p2, s2 = formats.quantize_mxfp4(as_f32(xb), rule="ceil", zero_block_scale=127)
    np.testing.assert_array_equal(packed, p2)
    np.testing.assert_array_equal(sw, formats.swizzle_block_scale(s2, pad=127))


@pytest.mark.parametrize("m,k", [(1, 7), (5, 100), (130, 4096)])
def test_fp8_per_tensor_matches_formats(m, k):
    xb = bf16_input(m, k, 3.0)
    # bf16_input zeroes 5 % of its 32-value blocks; at k = 7 a draw can be all zero (scale 0,
    # nothing to saturate), so draw again until something is non-zero.
    while not np.abs(as_f32(xb)).max() > 0:
        xb = bf16_input(m, k, 3.0)
    scale = float(np.abs(as_f32(xb)).max()) / 448.0 * 0.5  # half the values saturate
    values = q.quantize_fp8_per_tensor(xb, scale)
    v2, _ = formats.quantize_fp8_per_tensor(as_f32(xb), scale)
    np.testing.assert_array_equal(values, v2)
    assert (values == 0x7E).any() or (values == 0xFE).any()


@pytest.mark.parametrize("m,k", [(1, 128), (7, 384), (130, 4096)])
def test_fp8_group128_matches_formats(m, k):
    xb = bf16_input(m, k)
    values, scales = q.quantize_fp8_group128(xb)
    v2, s2 = formats.quantize_block_fp8(as_f32(xb), block_rows=1)
    np.testing.assert_array_equal(values, v2)
    np.testing.assert_array_equal(scales.view(np.uint32), s2.reshape(scales.shape).view(np.uint32))


def test_fp16_input_and_leading_dims():
    x = (np.random.randn(2, 3, 64) * 4).astype(np.float16)
    values, rows, sw = q.quantize_mxfp8(x)
    v2, s2 = formats.quantize_mxfp8(x.astype(np.float32).reshape(6, 64), zero_block_scale=127)
    np.testing.assert_array_equal(values, v2)
    np.testing.assert_array_equal(rows, s2)


def test_nvfp4_module_surface():
    xb = bf16_input(130, 256)
    gs = np.array([formats.nvfp4_global_scale(as_f32(xb))], np.float32)
    p = q.nvfp4.plan(130, 256)
    out = q.nvfp4.allocate_outputs(p)
    assert out.packed_a_storage.shape == (1, 130, 128)
    assert out.scale_storage.shape == (256 * 16,)
    q.nvfp4.run(plan=p, x=xb, global_scale=gs, outputs=out)
    packed, sw = q.quantize_nvfp4(xb, float(gs[0]))
    np.testing.assert_array_equal(out.packed_a_storage[0], packed)
    np.testing.assert_array_equal(out.scale_storage, sw.reshape(-1))
    with pytest.raises(b12x.InvalidArgumentError):
        q.nvfp4.plan(4, 40)


def test_mxfp8_quantize_rows_writes_padding():
    xb = bf16_input(5, 96)
    values = np.zeros((5, 96), np.uint8)
    rows = np.zeros((5, 3), np.uint8)
    mma = np.zeros(128 * 4, np.uint8)  # not pre-filled with 127: the op writes the padding
    q.mxfp8.quantize_rows(xb, values, rows, mma)
    _, s2 = formats.quantize_mxfp8(as_f32(xb), zero_block_scale=127)
    np.testing.assert_array_equal(mma.reshape(128, 4), formats.swizzle_block_scale(s2, pad=127))
    with pytest.raises(b12x.UnsupportedError):
        q.mxfp8.quantize_rows(xb, values, rows, mma, value_order="interleaved")


def test_validation_errors():
    xb = bf16_input(2, 64)
    with pytest.raises(b12x.InvalidArgumentError, match="multiple of 128"):
        q.quantize_fp8_group128(xb)
    with pytest.raises(b12x.InvalidArgumentError, match="expected 64"):
        q.quantize_nvfp4_out(xb, 1.0, np.zeros(63, np.uint8), np.zeros(512, np.uint8))
    with pytest.raises(b12x.InvalidArgumentError, match="scale_swizzled"):
        q.quantize_mxfp4_out(xb, np.zeros((2, 32), np.uint8), np.zeros(100, np.uint8))
    with pytest.raises(b12x.InvalidArgumentError, match="fp32"):
        q.quantize_mxfp8_out(xb.view(np.float16).astype(np.float32), np.zeros((2, 64), np.uint8),
                             np.zeros((2, 2), np.uint8))


# ---- GPU (torch + CUDA) ----------------------------------------------------------------------
def _to_torch_bf16(torch, xb):
    return torch.from_numpy(xb.view(np.int16)).view(torch.bfloat16).cuda()


def test_gpu_ops_bit_exact(cuda_torch):
    torch = cuda_torch
    for m, k in [(1, 256), (77, 512), (300, 4096)]:
        xb = bf16_input(m, k)
        x = _to_torch_bf16(torch, xb)
        gs = formats.nvfp4_global_scale(as_f32(xb))
        packed, sw = q.quantize_nvfp4(x, torch.tensor([gs], device="cuda"))
        rp, rs = q.quantize_nvfp4(xb, gs)
        np.testing.assert_array_equal(packed.cpu().numpy(), rp)
        np.testing.assert_array_equal(sw.cpu().numpy(), rs)
        v, r, s = q.quantize_mxfp8(x)
        rv, rr, rsw = q.quantize_mxfp8(xb)
        np.testing.assert_array_equal(v.cpu().numpy(), rv)
        np.testing.assert_array_equal(r.cpu().numpy(), rr)
        np.testing.assert_array_equal(s.cpu().numpy(), rsw)
        p4, s4 = q.quantize_mxfp4(x)
        rp4, rs4 = q.quantize_mxfp4(xb)
        np.testing.assert_array_equal(p4.cpu().numpy(), rp4)
        np.testing.assert_array_equal(s4.cpu().numpy(), rs4)
        gv, gsc = q.quantize_fp8_group128(x)
        rgv, rgs = q.quantize_fp8_group128(xb)
        np.testing.assert_array_equal(gv.cpu().numpy(), rgv)
        np.testing.assert_array_equal(gsc.cpu().numpy(), rgs)
        tv = q.quantize_fp8_per_tensor(x, 0.01)
        np.testing.assert_array_equal(tv.cpu().numpy(), q.quantize_fp8_per_tensor(xb, 0.01))


def test_gpu_graph_replay(cuda_torch):
    torch = cuda_torch
    m, k = 64, 1024
    x = torch.empty((m, k), dtype=torch.bfloat16, device="cuda")
    gs = torch.ones(1, dtype=torch.float32, device="cuda")
    packed = torch.empty((m, k // 2), dtype=torch.uint8, device="cuda")
    sw = torch.empty((128, 64), dtype=torch.uint8, device="cuda")
    xb = bf16_input(m, k)
    x.copy_(_to_torch_bf16(torch, xb))
    q.quantize_nvfp4_out(x, gs, packed, sw)  # warm-up
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        q.quantize_nvfp4_out(x, gs, packed, sw)
    for _ in range(3):
        xb = bf16_input(m, k)
        val = formats.nvfp4_global_scale(as_f32(xb))
        x.copy_(_to_torch_bf16(torch, xb))
        gs.fill_(val)
        packed.fill_(0xCD)
        sw.fill_(0xCD)
        g.replay()
        torch.cuda.synchronize()
        rp, rs = q.quantize_nvfp4(xb, val)
        np.testing.assert_array_equal(packed.cpu().numpy(), rp)
        np.testing.assert_array_equal(sw.cpu().numpy(), rs)


def test_gpu_custom_ops(cuda_torch):
    torch = cuda_torch
    for name in ("quantize_nvfp4", "quantize_mxfp8", "quantize_mxfp4", "quantize_fp8_tensor",
                 "quantize_fp8_group128"):
        assert hasattr(torch.ops.b12x, name)
    xb = bf16_input(40, 256)
    x = _to_torch_bf16(torch, xb)
    values = torch.empty((40, 256), dtype=torch.uint8, device="cuda")
    rows = torch.empty((40, 8), dtype=torch.uint8, device="cuda")
    mma = torch.empty((128, 8), dtype=torch.uint8, device="cuda")
    torch.ops.b12x.quantize_mxfp8(x, values, rows, mma)
    rv, rr, rm = q.quantize_mxfp8(xb)
    np.testing.assert_array_equal(values.cpu().numpy(), rv)
    np.testing.assert_array_equal(rows.cpu().numpy(), rr)
    np.testing.assert_array_equal(mma.cpu().numpy(), rm)
    gs = torch.tensor([3.0], device="cuda")
    packed = torch.empty((40, 128), dtype=torch.uint8, device="cuda")
    sw = torch.empty((128, 16), dtype=torch.uint8, device="cuda")
    torch.ops.b12x.quantize_nvfp4(x, gs, packed, sw)
    rp, rs = q.quantize_nvfp4(xb, 3.0)
    np.testing.assert_array_equal(packed.cpu().numpy(), rp)
    np.testing.assert_array_equal(sw.cpu().numpy(), rs)
