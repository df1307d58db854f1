"""b12x.formats and b12x._lib.intrinsics against independent implementations:

- GGML decoders vs the ``gguf`` package's own dequantizers (bit-exact, random blocks) and the
  Q8_0 quantizer vs ``gguf.quants.quantize`` (bit-exact, ties included);
- scalar encoders/decoders vs ``ml_dtypes`` on the domain where both define the same rule.
  Documented differences (hardware cvt rules vs ml_dtypes casts):
    * E4M3: ml_dtypes float8_e4m3fn never saturates (overflow and Inf -> NaN), i.e. it equals
      b12x "nosat" for every non-NaN input and "satfinite" for |x| < 464 (the rounding boundary);
      NaN inputs: ml_dtypes keeps the sign (0xFF for -NaN), cvt always gives 0x7F.
    * E5M2: ml_dtypes overflows to Inf = b12x "nosat" for non-NaN inputs.
    * E2M1: both saturate at +-6; NaN -> 0x7 in hardware, 0x8 (or 0x0) in ml_dtypes.
    * E8M0: ml_dtypes rounds to the nearest power of two (ties up); hardware only has rz (floor)
      and rp (ceil). On normal positive inputs below 2^127 ml_dtypes equals rp when the fp32
      mantissa is above 0x400000 and rz below it (exact ties differ between versions); ml_dtypes sends negatives/overflow to NaN
      (0xFF) where cvt ignores the sign and satfinite clamps to 0xFE.
- block formats vs numpy re-implementations built on ml_dtypes casts;
- the 128x4 swizzle vs vLLM's reshape/permute formulation (numpy, and torch when present);
- the committed generated GGML table header vs the generator output.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

try:
    import ml_dtypes
except ImportError:  # CI installs it (python/requirements-test.txt)
    ml_dtypes = None
try:
    import gguf
    from gguf import GGMLQuantizationType as QT
    from gguf import quants as gq
except ImportError:
    gguf = None

needs_ml = pytest.mark.skipif(ml_dtypes is None, reason="needs ml_dtypes (python/requirements-test.txt)")
needs_gguf = pytest.mark.skipif(gguf is None, reason="needs gguf (python/requirements-test.txt)")

from b12x import formats as F  # noqa: E402
from b12x._lib import intrinsics  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.default_rng()


def f32_bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


def assert_same_floats(a, b, what):
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    nan = np.isnan(a) & np.isnan(b)
    diff = (f32_bits(a) != f32_bits(b)) & ~nan
    assert not diff.any(), f"{what}: {diff.sum()} mismatches, first at {np.argwhere(diff)[:3]}"


# ---------------------------------------------------------------- GGML vs gguf -----------------
GGUF_TYPES = ({"q8_0": QT.Q8_0, "iq2_xxs": QT.IQ2_XXS, "iq2_xs": QT.IQ2_XS}
              if gguf is not None else {})


def random_blocks(ggml_type, nblocks):
    _, _, bb = F.GGML_BLOCKS[ggml_type]
    raw = RNG.integers(0, 256, size=(nblocks, bb), dtype=np.uint8)
    # d (fp16, bytes 0-1): keep it finite (NaN payload signs are not part of either contract);
    # subnormal, negative and large d stay in.
    d = raw[:, :2].copy().view(np.uint16)
    d &= np.uint16(0xFBFF)
    raw[:, :2] = d.view(np.uint8).reshape(nblocks, 2)
    return raw


@needs_gguf
@pytest.mark.parametrize("ggml_type", ["q8_0", "iq2_xxs", "iq2_xs"])
def test_ggml_decode_matches_gguf(ggml_type):
    raw = random_blocks(ggml_type, 300)
    ours = F.dequantize_ggml(ggml_type, raw.reshape(3, -1))
    with np.errstate(all="ignore"):
        ref = gq.dequantize(raw.reshape(3, -1), GGUF_TYPES[ggml_type])
    assert_same_floats(ours, ref.astype(np.float32), f"{ggml_type} decode")
    # the gguf enum (an int) names the same type
    assert_same_floats(F.dequantize_ggml(GGUF_TYPES[ggml_type], raw), ref.reshape(300, -1),
                       f"{ggml_type} decode (type id)")
    # bytes input gives the flat value vector
    flat = F.dequantize_ggml(ggml_type, raw.tobytes())
    assert_same_floats(flat, ref.reshape(-1), f"{ggml_type} decode (bytes)")


@needs_gguf
def test_q8_0_quantize_matches_gguf():
    x = (RNG.standard_normal((16, 512)) * RNG.uniform(1e-3, 10, (16, 1))).astype(np.float32)
    # Rows whose codes land exactly on .5 ties: amax 127 -> d = 1, id = 1.
    x[0, :32] = np.arange(32) - 15.5
    x[0, 0] = 127.0
    x[1, :8] = [127, 82.5, -103.5, 0.5, -0.5, 1.5, 2.5, -2.5]
    x[2, :32] = 0.0  # zero block
    ours = F.quantize_ggml("q8_0", x)
    ref = gq.quantize(x, QT.Q8_0)
    assert ours.dtype == np.uint8 and ours.shape == ref.shape
    assert np.array_equal(ours, ref)
    assert ours[1, 2 + 1] == 83 and ours[1, 2 + 2].view(np.int8) == -104


def test_ggml_partial_blocks_are_errors():
    with pytest.raises(ValueError, match="partial block"):
        F.dequantize_ggml("iq2_xs", b"\0" * 75)
    with pytest.raises(ValueError, match="whole number"):
        F.quantize_ggml("q8_0", np.zeros(40, np.float32))
    with pytest.raises(ValueError, match="not supported"):
        F.quantize_ggml("q4_0", np.zeros(32, np.float32))


@needs_gguf
@pytest.mark.parametrize("ggml_type", ["iq2_xxs", "iq2_xs"])
def test_iq2_encoder_roundtrip_quality(ggml_type):
    x = (RNG.standard_normal((2, 1024)) * 0.02).astype(np.float32)
    blocks = F.quantize_ggml(ggml_type, x)
    assert blocks.shape == (2, 4 * F.GGML_BLOCKS[ggml_type][2])
    y = F.dequantize_ggml(ggml_type, blocks)
    with np.errstate(all="ignore"):
        ref = gq.dequantize(blocks, GGUF_TYPES[ggml_type])
    assert_same_floats(y, ref, "gguf decodes b12x's IQ2 encoding identically")
    rel = np.linalg.norm(y - x) / np.linalg.norm(x)
    assert rel < 0.4, rel


# ---------------------------------------------------------------- scalar codecs vs ml_dtypes ---
def sweep_f32(n=1 << 20):
    """Random bit patterns plus every tie/boundary of the 8-bit formats (+-2 ulp)."""
    pats = [RNG.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)]
    edges = []
    for dt in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float4_e2m1fn):
        codes = np.arange(256 if dt is not ml_dtypes.float4_e2m1fn else 16, dtype=np.uint8)
        v = np.abs(codes.view(dt).astype(np.float64))
        v = np.unique(v[np.isfinite(v)])
        v = np.append(v, v[-1] + (v[-1] - v[-2]))
        edges += list(v) + list((v[1:] + v[:-1]) / 2)
    e = f32_bits(np.array(edges, dtype=np.float32)).astype(np.int64)
    near = (e[:, None] + np.arange(-2, 3)[None, :]).reshape(-1)
    near = near[(near >= 0) & (near < 0x7F800000)].astype(np.uint32)
    pats += [near, near | np.uint32(0x80000000)]
    pats.append(np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0x00000001, 0x80000000, 0],
                         dtype=np.uint32))
    return np.concatenate(pats).view(np.float32)


@needs_ml
def test_e4m3_vs_ml_dtypes():
    x = sweep_f32()
    ml = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    finite_or_inf = ~np.isnan(x)
    nosat = F.encode_scalar("e4m3", x, "nosat")
    assert np.array_equal(nosat[finite_or_inf], ml[finite_or_inf])
    sat = F.encode_scalar("e4m3", x, "satfinite")
    small = np.abs(x) < 464
    assert np.array_equal(sat[small], ml[small])
    assert (sat[np.abs(x) >= 464] & 0x7F == 0x7E).all()  # satfinite clamps, incl. Inf
    assert (sat[np.isnan(x)] == 0x7F).all() and (nosat[np.isnan(x)] == 0x7F).all()
    codes = np.arange(256, dtype=np.uint8)
    assert_same_floats(F.decode_scalar("e4m3", codes), codes.view(ml_dtypes.float8_e4m3fn)
                       .astype(np.float32), "e4m3 decode")


@needs_ml
def test_e5m2_vs_ml_dtypes():
    x = sweep_f32()
    ml = x.astype(ml_dtypes.float8_e5m2).view(np.uint8)
    keep = ~np.isnan(x)
    assert np.array_equal(F.encode_scalar("e5m2", x, "nosat")[keep], ml[keep])
    small = np.abs(x) < 57344
    assert np.array_equal(F.encode_scalar("e5m2", x, "satfinite")[small], ml[small])
    codes = np.arange(256, dtype=np.uint8)
    assert_same_floats(F.decode_scalar("e5m2", codes), codes.view(ml_dtypes.float8_e5m2)
                       .astype(np.float32), "e5m2 decode")


@needs_ml
def test_e2m1_vs_ml_dtypes():
    x = sweep_f32()
    ml = x.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    ours = F.encode_scalar("e2m1", x)
    keep = ~np.isnan(x)
    assert np.array_equal(ours[keep], ml[keep])
    assert (ours[np.isnan(x)] == 0x7).all()
    codes = np.arange(16, dtype=np.uint8)
    assert_same_floats(F.decode_scalar("e2m1", codes), codes.view(ml_dtypes.float4_e2m1fn)
                       .astype(np.float32), "e2m1 decode")


@needs_ml
def test_ue8m0_vs_ml_dtypes():
    e8m0 = getattr(ml_dtypes, "float8_e8m0fnu", None)
    if e8m0 is None:
        pytest.skip("this ml_dtypes has no float8_e8m0fnu")
    u = RNG.integers(0x00800000, 0x7F000000, size=1 << 20, dtype=np.uint64).astype(np.uint32)
    x = u.view(np.float32)
    ml = x.astype(e8m0).view(np.uint8)
    rz = F.encode_scalar("ue8m0", x, "rz")
    rp = F.encode_scalar("ue8m0", x, "rp")
    want = np.where((u & 0x7FFFFF) > 0x400000, rp, rz)
    # Exact ties (mantissa 1.5) are left out: ml_dtypes versions differ there (0.6 rounds up).
    off_tie = (u & 0x7FFFFF) != 0x400000
    assert np.array_equal(ml[off_tie], want[off_tie])
    codes = np.arange(256, dtype=np.uint8)
    assert_same_floats(F.decode_scalar("ue8m0", codes), codes.view(e8m0).astype(np.float32),
                       "ue8m0 decode")


@needs_ml
def test_bf16_fp16_vs_ml_dtypes_numpy():
    x = sweep_f32()
    keep = ~np.isnan(x)
    assert np.array_equal(F.encode_scalar("bf16", x)[keep],
                          x.astype(ml_dtypes.bfloat16).view(np.uint16)[keep])
    assert np.array_equal(F.encode_scalar("fp16", x)[keep], x.astype(np.float16).view(np.uint16)[keep])
    codes = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    assert_same_floats(F.decode_scalar("fp16", codes), codes.view(np.float16).astype(np.float32),
                       "fp16 decode")
    assert_same_floats(F.decode_scalar("bf16", codes), codes.view(ml_dtypes.bfloat16)
                       .astype(np.float32), "bf16 decode")


# ---------------------------------------------------------------- block formats ----------------
def e2m1_codes(y):
    c = np.asarray(y, np.float32).astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    return np.where(c == 8, 0, c).astype(np.uint8)  # canonical +0


def unpack_fp4(packed):
    return np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(packed.shape[:-1] + (-1,))


@needs_ml
def test_nvfp4_vs_numpy():
    x = (RNG.standard_normal((8, 256)) * 3).astype(np.float32)
    x[0, :16] = 0
    packed, scales, gs = F.quantize_nvfp4(x)
    assert gs == np.float32(2688.0) / np.abs(x).max()
    blocks = x.reshape(-1, 16)
    amax = np.abs(blocks).max(axis=1)
    sval = (np.float32(gs) * amax) / np.float32(6)
    sf = np.minimum(sval, np.float32(448)).astype(ml_dtypes.float8_e4m3fn)
    assert np.array_equal(scales.reshape(-1), sf.view(np.uint8))
    dsf = sf.astype(np.float32)
    with np.errstate(divide="ignore"):
        mult = np.where(dsf > 0, np.float32(1) / (dsf * (np.float32(1) / np.float32(gs))), 0)
    codes = e2m1_codes(blocks * mult.astype(np.float32)[:, None])
    assert np.array_equal(unpack_fp4(packed).reshape(-1, 16), codes)
    y = F.dequantize_nvfp4(packed, scales, gs)
    ref = (codes.view(ml_dtypes.float4_e2m1fn).astype(np.float32) * dsf[:, None]) / np.float32(gs)
    assert_same_floats(y.reshape(-1, 16), ref, "nvfp4 decode")


@needs_ml
@pytest.mark.parametrize("rule", ["floor", "ceil"])
def test_mxfp4_vs_numpy(rule):
    x = (RNG.standard_normal((4, 512)) * RNG.uniform(1e-3, 1e3, (4, 1))).astype(np.float32)
    packed, scales = F.quantize_mxfp4(x, rule=rule)
    blocks = x.reshape(-1, 32).astype(np.float64)
    amax = np.abs(blocks).max(axis=1)
    if rule == "floor":
        e = np.floor(np.log2(amax)) - 2
    else:
        e = np.ceil(np.log2(amax / 6.0))
    assert np.array_equal(scales.reshape(-1), (e + 127).astype(np.uint8))
    codes = e2m1_codes((blocks * 2.0 ** -e[:, None]).astype(np.float32))
    assert np.array_equal(unpack_fp4(packed).reshape(-1, 32), codes)
    y = F.dequantize_mxfp4(packed, scales)
    ref = codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64) * 2.0 ** e[:, None]
    assert_same_floats(y.reshape(-1, 32), ref.astype(np.float32), "mxfp4 decode")


@needs_ml
def test_mxfp8_vs_numpy():
    x = (RNG.standard_normal((4, 512)) * 0.1).astype(np.float32)
    x[1, :32] = 0
    v, s = F.quantize_mxfp8(x)
    blocks = x.reshape(-1, 32)
    q = blocks.__abs__().max(axis=1) / np.float32(448)
    bits = q.view(np.uint32)
    e = (bits >> 23) + ((bits & 0x7FFFFF) != 0)
    e = np.where(q == 0, 127, e)
    assert np.array_equal(s.reshape(-1), e.astype(np.uint8))
    scaled = (blocks.astype(np.float64) * 2.0 ** (127 - e.astype(np.float64))[:, None])
    ref = np.clip(scaled, -448, 448).astype(np.float32).astype(ml_dtypes.float8_e4m3fn)
    assert np.array_equal(v.reshape(-1, 32), ref.view(np.uint8))
    _, s0 = F.quantize_mxfp8(x, zero_block_scale=0)
    assert s0[1, 0] == 0
    y = F.dequantize_mxfp8(v, s)
    assert np.all(np.abs(y - x) <= np.abs(x) / 16 + 2.0 ** (e.repeat(32).reshape(x.shape) - 137.0))


@needs_ml
def test_block_fp8_and_requant():
    x = (RNG.standard_normal((200, 300)) * 0.05).astype(np.float32)
    v, s = F.quantize_block_fp8(x, 128)
    assert s.shape == (2, 3)
    amax = np.array([[np.abs(x[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]).max()
                      for j in range(3)] for i in range(2)], dtype=np.float32)
    assert np.array_equal(s, amax / np.float32(448))
    full = np.repeat(np.repeat(s, 128, 0), 128, 1)[:200, :300]
    ref = np.clip(x / full, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert np.array_equal(v, ref)
    y = F.dequantize_block_fp8(v, s, 128)
    assert_same_floats(y, v.view(ml_dtypes.float8_e4m3fn).astype(np.float32) * full, "block fp8")
    va, sa = F.quantize_block_fp8(x, 1)
    assert sa.shape == (200, 3)
    q2, e = F.requantize_block_fp8_to_ue8m0(v, s)
    w = v.view(ml_dtypes.float8_e4m3fn).astype(np.float32) * full
    we = np.repeat(np.repeat(e.astype(np.float64), 128, 0), 128, 1)[:200, :300]
    w2 = q2.view(ml_dtypes.float8_e4m3fn).astype(np.float64) * 2.0 ** (we - 127)
    assert np.all(np.abs(w2 - w) <= np.abs(w) / 16 + 2.0 ** (we - 137))


@needs_ml
def test_fp8_per_tensor():
    x = (RNG.standard_normal(1000) * 5).astype(np.float32)
    v, s = F.quantize_fp8_per_tensor(x)
    assert s == np.float32(np.abs(x).max()) / np.float32(448)
    ref = (x / np.float32(s)).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert np.array_equal(v, ref)
    v2, s2 = F.quantize_fp8_per_tensor(x, scale=0.001)
    assert np.isclose(s2, 0.001)
    assert (v2 & 0x7F).max() == 0x7E  # saturated, never NaN
    y = F.dequantize_fp8_per_tensor(v, s)
    assert_same_floats(y, v.view(ml_dtypes.float8_e4m3fn).astype(np.float32) * np.float32(s),
                       "fp8 per tensor")


# ---------------------------------------------------------------- swizzle ----------------------
def swizzle_ref(a, pad=0):
    """vLLM's formulation: pad, reshape [B, M/128, 4, 32, K/4, 4], permute (0,1,4,3,2,5)."""
    squeeze = a.ndim == 2
    a = a[None] if squeeze else a
    b, r, c = a.shape
    pr, pc = -(-r // 128) * 128, -(-c // 4) * 4
    p = np.full((b, pr, pc), pad, dtype=np.uint8)
    p[:, :r, :c] = a.view(np.uint8)
    out = p.reshape(b, pr // 128, 4, 32, pc // 4, 4).transpose(0, 1, 4, 3, 2, 5).reshape(b, pr, pc)
    return out[0] if squeeze else out


@pytest.mark.parametrize("shape", [(1, 1), (100, 3), (128, 4), (300, 9), (2, 130, 5)])
def test_swizzle_numpy(shape):
    a = RNG.integers(1, 255, size=shape, dtype=np.uint8)
    out = intrinsics.swizzle_block_scale(a)
    assert np.array_equal(out, swizzle_ref(a))
    assert np.array_equal(intrinsics.unswizzle_block_scale(out, shape[-2], shape[-1]), a)
    mx = intrinsics.swizzle_block_scale(a, pad=127)
    assert np.array_equal(mx, swizzle_ref(a, 127))
    # 1-byte float dtypes keep their dtype
    if ml_dtypes is None:
        return
    f8 = a.view(ml_dtypes.float8_e4m3fn)
    out8 = intrinsics.swizzle_block_scale(f8)
    assert out8.dtype == f8.dtype and np.array_equal(out8.view(np.uint8), swizzle_ref(a))


def test_swizzle_torch_cpu():
    torch = pytest.importorskip("torch")
    a = RNG.integers(1, 255, size=(2, 300, 9), dtype=np.uint8)
    t = torch.from_numpy(a)
    for dt in [torch.uint8] + [getattr(torch, n) for n in ("float8_e4m3fn", "float8_e8m0fnu")
                               if hasattr(torch, n)]:
        tt = t.view(dt)
        out = intrinsics.swizzle_block_scale(tt)
        assert out.dtype == dt and tuple(out.shape) == (2, 384, 12)
        assert np.array_equal(out.view(torch.uint8).numpy(), swizzle_ref(a))
        back = intrinsics.unswizzle_block_scale(out, 300, 9)
        assert np.array_equal(back.view(torch.uint8).numpy(), a)


def test_swizzle_torch_cuda(cuda_torch):
    """vLLM calls swizzle_block_scale on CUDA weight scales: torch ops on the device."""
    torch = cuda_torch
    a = RNG.integers(1, 255, size=(300, 9), dtype=np.uint8)
    t = torch.from_numpy(a).cuda()
    for name in ("uint8", "float8_e4m3fn", "float8_e8m0fnu"):
        if not hasattr(torch, name):
            continue
        dt = getattr(torch, name)
        out = intrinsics.swizzle_block_scale(t.view(dt))
        assert out.is_cuda and out.dtype == dt and tuple(out.shape) == (384, 12)
        assert np.array_equal(out.view(torch.uint8).cpu().numpy(), swizzle_ref(a))
        back = intrinsics.unswizzle_block_scale(out, 300, 9)
        assert np.array_equal(back.view(torch.uint8).cpu().numpy(), a)
    b = RNG.integers(1, 255, size=(3, 130, 5), dtype=np.uint8)
    out = intrinsics.swizzle_block_scale(torch.from_numpy(b).cuda())
    assert np.array_equal(out.cpu().numpy(), swizzle_ref(b))


def test_swizzle_rejects_bad_input():
    with pytest.raises(ValueError):
        intrinsics.swizzle_block_scale(np.zeros((4,), np.uint8))
    with pytest.raises(ValueError):
        intrinsics.swizzle_block_scale(np.zeros((4, 4), np.float32))


# ---------------------------------------------------------------- generated tables ----------
def test_generated_ggml_tables_up_to_date():
    json_path = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "ggml-iq2-tables.json"))
    if not os.path.exists(json_path):
        pytest.skip(f"{json_path} not present: cannot regenerate src/formats/ggml_tables.h")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "ggml_tables.h")
        subprocess.run([sys.executable, os.path.join(ROOT, "codegen", "gen_ggml_tables.py"),
                        "--json", json_path, "--output", out], check=True)
        with open(out) as fa, open(os.path.join(ROOT, "src", "formats", "ggml_tables.h")) as fb:
            assert fa.read() == fb.read(), "src/formats/ggml_tables.h is stale: re-run the generator"
