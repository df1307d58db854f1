"""Host-memory codecs of b12x's number and block formats (numpy in, numpy out).

Every function calls the library's C ABI (``b12x/c_api/formats.h``), i.e. the same B12X_HD codecs
the GPU kernels use, so results here are the bit-exact oracle for device outputs.

GGML row data (names fixed by the project contract)::

    dequantize_ggml(ggml_type, blocks) -> numpy.float32 array
    quantize_ggml(ggml_type, values) -> numpy.uint8 array

``ggml_type`` is ``"q8_0"``, ``"iq2_xxs"`` or ``"iq2_xs"`` (the ggml type ids 8 / 16 / 17, e.g.
``gguf.GGMLQuantizationType.IQ2_XS``, are accepted too). ``blocks`` is ``bytes`` or a uint8 array
whose last dimension is a whole number of blocks (34 / 66 / 74 bytes); a partial block is an
error. IQ2 quantization uses b12x's simple encoder (no importance matrix; for tests and demos).

Block formats (values along the last axis, row-major): NVFP4, MXFP4 (floor or ceil scale rule),
MXFP8, DeepSeek block FP8 (128x128 weights / 1x128 activations), per-tensor FP8, the b12x
requantisation of block FP8 to UE8M0, and scalar codecs (E4M3, E5M2, E2M1, UE8M0, UE4M3, BF16,
FP16). Scale grids are returned in linear layout; ``swizzle_block_scale`` makes the 128x4 layout.
"""

from __future__ import annotations

import ctypes
from typing import Optional, Tuple, Union

import numpy as np

from . import _capi

__all__ = [
    "dequantize_ggml", "quantize_ggml", "GGML_BLOCKS",
    "quantize_nvfp4", "dequantize_nvfp4", "nvfp4_global_scale",
    "quantize_mxfp4", "dequantize_mxfp4", "quantize_mxfp8", "dequantize_mxfp8",
    "quantize_block_fp8", "dequantize_block_fp8", "requantize_block_fp8_to_ue8m0",
    "quantize_fp8_per_tensor", "dequantize_fp8_per_tensor",
    "encode_scalar", "decode_scalar", "swizzle_block_scale", "unswizzle_block_scale",
]

# Block formats (include/b12x/c_api/formats.h).
NVFP4, MXFP4, MXFP8, BLOCK_FP8, FP8_PER_TENSOR, Q8_0, IQ2_XXS, IQ2_XS = 1, 2, 3, 4, 5, 6, 7, 8

#: ggml_type -> (format code, values per block, bytes per block)
GGML_BLOCKS = {"q8_0": (Q8_0, 32, 34), "iq2_xxs": (IQ2_XXS, 256, 66), "iq2_xs": (IQ2_XS, 256, 74)}


class QuantParams(ctypes.Structure):
    _fields_ = [
        ("format", ctypes.c_int32),
        ("mx_scale_rule", ctypes.c_int32),
        ("zero_block_scale", ctypes.c_int32),
        ("global_scale", ctypes.c_float),
        ("block_rows", ctypes.c_int64),
    ]


_P = ctypes.POINTER(QuantParams)
_T = _capi.TensorP
_capi.declare("b12x_quantize", [_T, _T, _T, _P])
_capi.declare("b12x_dequantize", [_T, _T, _T, _P])
_capi.declare("b12x_requantize_block_fp8_to_ue8m0", [_T, _T, _T, _T])
_capi.declare("b12x_swizzle_block_scale", [_T, _T, ctypes.c_int32])
_capi.declare("b12x_unswizzle_block_scale", [_T, _T])
_capi.declare("b12x_encode_scalar", [ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p,
                                     ctypes.c_void_p, ctypes.c_int64])
_capi.declare("b12x_decode_scalar", [ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_int64])

_RULES = {"floor": 0, "ocp": 0, "ceil": 1}


def _params(fmt: int, *, rule: str = "floor", zero_block_scale: int = 127,
            global_scale: float = 0.0, block_rows: int = 128) -> QuantParams:
    if rule not in _RULES:
        raise _capi.InvalidArgumentError(
            1, f"b12x.formats: rule={rule!r} is not a scale rule (supported: 'floor', 'ceil')")
    if zero_block_scale not in (0, 127):
        raise _capi.InvalidArgumentError(
            1, f"b12x.formats: zero_block_scale={zero_block_scale} (supported: 127, 0)")
    return QuantParams(fmt, _RULES[rule], zero_block_scale, float(global_scale), int(block_rows))


def _f32(x, name: str = "x") -> np.ndarray:
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    if a.ndim == 0:
        raise _capi.InvalidArgumentError(1, f"b12x.formats: {name} must have at least one dim")
    return a


def _bytes(x, name: str) -> np.ndarray:
    if isinstance(x, (bytes, bytearray, memoryview)):
        return np.frombuffer(bytes(x), dtype=np.uint8).copy()
    a = np.asarray(x)
    if a.dtype.itemsize != 1:
        raise _capi.InvalidArgumentError(
            1, f"b12x.formats: {name} must be bytes or a 1-byte array, got dtype {a.dtype}")
    if a.dtype != np.uint8:
        a = a.view(np.uint8)
    return np.ascontiguousarray(a)


def _ref(a: np.ndarray, name: str):
    return _capi.ref(a, name=name)


# ---------------------------------------------------------------- GGML ---------------------
#: GGML type ids (ggml.h; gguf.GGMLQuantizationType is an IntEnum with these values).
GGML_TYPE_IDS = {8: "q8_0", 16: "iq2_xxs", 17: "iq2_xs"}


def _ggml(ggml_type):
    if isinstance(ggml_type, (int, np.integer)) and not isinstance(ggml_type, bool):
        key = GGML_TYPE_IDS.get(int(ggml_type), f"type id {int(ggml_type)}")
    else:
        key = str(ggml_type).lower()
    if key not in GGML_BLOCKS:
        raise _capi.InvalidArgumentError(
            1, f"b12x.formats: ggml_type={ggml_type!r} is not supported "
               f"(supported: {', '.join(GGML_BLOCKS)})")
    return GGML_BLOCKS[key]


def _ggml_name(ggml_type) -> str:
    for name, spec in GGML_BLOCKS.items():
        if spec == _ggml(ggml_type):
            return name
    raise AssertionError(ggml_type)  # pragma: no cover


def dequantize_ggml(ggml_type: str, blocks: Union[bytes, np.ndarray]) -> np.ndarray:
    """Decode GGML blocks (bit-exact with ggml). The last axis of ``blocks`` (bytes) becomes
    the value axis: ``[..., n*block_bytes] -> [..., n*block_values]`` float32."""
    fmt, bv, bb = _ggml(ggml_type)
    ggml_type = _ggml_name(ggml_type)
    raw = _bytes(blocks, "blocks")
    if raw.ndim == 0:
        raw = raw.reshape(1)
    nbytes = raw.shape[-1]
    if nbytes % bb:
        raise _capi.InvalidArgumentError(
            1, f"b12x.formats.dequantize_ggml: {nbytes} bytes is not a whole number of "
               f"{ggml_type} blocks ({bb} bytes per block of {bv} values; partial block of "
               f"{nbytes % bb} bytes)")
    out = np.empty(raw.shape[:-1] + (nbytes // bb * bv,), dtype=np.float32)
    if out.size:
        p = _params(fmt)
        _capi.call("b12x_dequantize", _ref(raw.reshape(-1, nbytes), "blocks"), None,
                   _ref(out.reshape(-1, out.shape[-1]), "out"), ctypes.byref(p))
    return out


def quantize_ggml(ggml_type: str, values) -> np.ndarray:
    """Encode float values ``[..., k]`` (k a multiple of the block) into GGML blocks
    ``[..., k/block_values*block_bytes]`` uint8. Q8_0 is ggml's reference quantizer bit for bit;
    IQ2_XXS / IQ2_XS use b12x's simple encoder."""
    fmt, bv, bb = _ggml(ggml_type)
    ggml_type = _ggml_name(ggml_type)
    x = _f32(values, "values")
    k = x.shape[-1]
    if k % bv:
        raise _capi.InvalidArgumentError(
            1, f"b12x.formats.quantize_ggml: row length {k} is not a whole number of "
               f"{ggml_type} blocks ({bv} values per block)")
    out = np.empty(x.shape[:-1] + (k // bv * bb,), dtype=np.uint8)
    if out.size:
        p = _params(fmt)
        _capi.call("b12x_quantize", _ref(x.reshape(-1, k), "values"),
                   _ref(out.reshape(-1, out.shape[-1]), "blocks"), None, ctypes.byref(p))
    return out


# ---------------------------------------------------------------- generic helpers ----------
def _quantize(fmt: int, x: np.ndarray, values: np.ndarray, scales: Optional[np.ndarray],
              **kw) -> None:
    p = _params(fmt, **kw)
    k = x.shape[-1]
    _capi.call("b12x_quantize", _ref(x.reshape(-1, k), "x"),
               _ref(values.reshape(-1, values.shape[-1]), "values"),
               None if scales is None else _ref(scales, "scales"), ctypes.byref(p))


def _dequantize(fmt: int, values: np.ndarray, scales: Optional[np.ndarray], out: np.ndarray,
                **kw) -> None:
    p = _params(fmt, **kw)
    _capi.call("b12x_dequantize", _ref(values.reshape(-1, values.shape[-1]), "values"),
               None if scales is None else _ref(scales, "scales"),
               _ref(out.reshape(-1, out.shape[-1]), "out"), ctypes.byref(p))


def _check_k(k: int, block: int, what: str) -> None:
    if k % block:
        raise _capi.InvalidArgumentError(
            1, f"b12x.formats: {what} row length k={k} is not a whole number of blocks "
               f"({block} values per block; partial blocks are not supported)")


# ---------------------------------------------------------------- NVFP4 --------------------
def nvfp4_global_scale(x) -> float:
    """gs = 448*6 / amax(x) (multiply convention); 0 for an all-zero tensor."""
    a = _f32(x)
    amax = float(np.max(np.abs(a[~np.isnan(a)]))) if a.size else 0.0
    return float(np.float32(448.0 * 6.0) / np.float32(amax)) if amax > 0 else 0.0


def quantize_nvfp4(x, global_scale: Optional[float] = None
                   ) -> Tuple[np.ndarray, np.ndarray, float]:
    """``x[..., k]`` -> (packed uint8 ``[..., k/2]``, UE4M3 scales uint8 ``[..., k/16]``
    (linear layout), global scale). ``global_scale`` defaults to 448*6/amax(x)."""
    a = _f32(x)
    k = a.shape[-1]
    _check_k(k, 16, "NVFP4")
    gs = nvfp4_global_scale(a) if global_scale is None else float(global_scale)
    packed = np.empty(a.shape[:-1] + (k // 2,), dtype=np.uint8)
    scales = np.empty(a.shape[:-1] + (k // 16,), dtype=np.uint8)
    _quantize(NVFP4, a, packed, scales, global_scale=gs)
    return packed, scales, gs


def dequantize_nvfp4(packed, scales, global_scale: float) -> np.ndarray:
    """(packed ``[..., k/2]``, scales ``[..., k/16]``, gs) -> float32 ``[..., k]``,
    value = e2m1 * ue4m3 / gs."""
    q = _bytes(packed, "packed")
    s = _bytes(scales, "scales")
    out = np.empty(q.shape[:-1] + (q.shape[-1] * 2,), dtype=np.float32)
    _dequantize(NVFP4, q, s, out, global_scale=global_scale)
    return out


# ---------------------------------------------------------------- MX ----------------------
def quantize_mxfp4(x, rule: str = "floor", zero_block_scale: int = 127
                   ) -> Tuple[np.ndarray, np.ndarray]:
    """``x[..., k]`` -> (packed uint8 ``[..., k/2]``, E8M0 scales uint8 ``[..., k/32]``).
    ``rule``: "floor" (OCP MX v1.0) or "ceil" (2^ceil(log2(amax/6)), never clips)."""
    a = _f32(x)
    k = a.shape[-1]
    _check_k(k, 32, "MXFP4")
    packed = np.empty(a.shape[:-1] + (k // 2,), dtype=np.uint8)
    scales = np.empty(a.shape[:-1] + (k // 32,), dtype=np.uint8)
    _quantize(MXFP4, a, packed, scales, rule=rule, zero_block_scale=zero_block_scale)
    return packed, scales


def dequantize_mxfp4(packed, scales) -> np.ndarray:
    q = _bytes(packed, "packed")
    s = _bytes(scales, "scales")
    out = np.empty(q.shape[:-1] + (q.shape[-1] * 2,), dtype=np.float32)
    _dequantize(MXFP4, q, s, out)
    return out


def quantize_mxfp8(x, zero_block_scale: int = 127) -> Tuple[np.ndarray, np.ndarray]:
    """``x[..., k]`` -> (E4M3 uint8 ``[..., k]``, E8M0 scales uint8 ``[..., k/32]``);
    scale = pow2_ceil(amax/448)."""
    a = _f32(x)
    k = a.shape[-1]
    _check_k(k, 32, "MXFP8")
    values = np.empty(a.shape, dtype=np.uint8)
    scales = np.empty(a.shape[:-1] + (k // 32,), dtype=np.uint8)
    _quantize(MXFP8, a, values, scales, zero_block_scale=zero_block_scale)
    return values, scales


def dequantize_mxfp8(values, scales) -> np.ndarray:
    q = _bytes(values, "values")
    s = _bytes(scales, "scales")
    out = np.empty(q.shape, dtype=np.float32)
    _dequantize(MXFP8, q, s, out)
    return out


# ---------------------------------------------------------------- FP8 with fp32 scales -----
def _grid(rows: int, k: int, block_rows: int) -> Tuple[int, int]:
    return (rows + block_rows - 1) // block_rows, (k + 127) // 128


def quantize_block_fp8(x, block_rows: int = 128) -> Tuple[np.ndarray, np.ndarray]:
    """2-D ``x[rows, k]`` -> (E4M3 uint8 ``[rows, k]``, fp32 scales
    ``[ceil(rows/block_rows), ceil(k/128)]``), s = amax/448 per tile (multiplied at decode).
    block_rows = 128 for DeepSeek weights, 1 for 1x128 activation groups."""
    a = _f32(x)
    if a.ndim != 2:
        raise _capi.InvalidArgumentError(1, f"b12x.formats: x must be 2-D, got {a.shape}")
    values = np.empty(a.shape, dtype=np.uint8)
    scales = np.empty(_grid(a.shape[0], a.shape[1], block_rows), dtype=np.float32)
    _quantize(BLOCK_FP8, a, values, scales, block_rows=block_rows)
    return values, scales


def dequantize_block_fp8(values, scales, block_rows: int = 128) -> np.ndarray:
    q = _bytes(values, "values")
    s = np.ascontiguousarray(scales, dtype=np.float32)
    out = np.empty(q.shape, dtype=np.float32)
    _dequantize(BLOCK_FP8, q, s, out, block_rows=block_rows)
    return out


def requantize_block_fp8_to_ue8m0(values, scales) -> Tuple[np.ndarray, np.ndarray]:
    """b12x load-time rule: E4M3 ``[N, K]`` + fp32 scales ``[ceil(N/128), ceil(K/128)]`` ->
    (E4M3 ``[N, K]``, UE8M0 bytes of the same grid). Power-of-two scales keep their values."""
    q = _bytes(values, "values")
    s = np.ascontiguousarray(scales, dtype=np.float32)
    out_q = np.empty_like(q)
    out_s = np.empty(s.shape, dtype=np.uint8)
    _capi.call("b12x_requantize_block_fp8_to_ue8m0", _ref(q, "values"), _ref(s, "scales"),
               _ref(out_q, "out_values"), _ref(out_s, "out_scales"))
    return out_q, out_s


def quantize_fp8_per_tensor(x, scale: Optional[float] = None) -> Tuple[np.ndarray, float]:
    """-> (E4M3 uint8, scale). ``scale`` None computes amax/448; a given static scale is used
    as is. q = e4m3_satfinite(x / scale)."""
    a = _f32(x)
    values = np.empty(a.shape, dtype=np.uint8)
    s = np.array([0.0 if scale is None else scale], dtype=np.float32)
    _quantize(FP8_PER_TENSOR, a, values, s, global_scale=float(s[0]))
    return values, float(s[0])


def dequantize_fp8_per_tensor(values, scale: float) -> np.ndarray:
    q = _bytes(values, "values")
    if q.ndim == 0:
        q = q.reshape(1)
    s = np.array([scale], dtype=np.float32)
    out = np.empty(q.shape, dtype=np.float32)
    _dequantize(FP8_PER_TENSOR, q, s, out)
    return out


# ---------------------------------------------------------------- scalar codecs ------------
_SCALAR = {"e4m3": (_capi.FP8_E4M3, 1), "fp8_e4m3": (_capi.FP8_E4M3, 1),
           "float8_e4m3fn": (_capi.FP8_E4M3, 1),
           "e5m2": (_capi.FP8_E5M2, 1), "fp8_e5m2": (_capi.FP8_E5M2, 1),
           "float8_e5m2": (_capi.FP8_E5M2, 1),
           "e2m1": (_capi.FP4_E2M1, 1), "fp4_e2m1": (_capi.FP4_E2M1, 1),
           "ue8m0": (_capi.UE8M0, 1), "e8m0": (_capi.UE8M0, 1), "float8_e8m0fnu": (_capi.UE8M0, 1),
           "ue4m3": (_capi.UE4M3, 1),
           "bf16": (_capi.BF16, 2), "bfloat16": (_capi.BF16, 2),
           "fp16": (_capi.FP16, 2), "float16": (_capi.FP16, 2)}
_MODES = {"satfinite": 0, "nosat": 1, "rz": 0, "floor": 0, "rp": 1, "ceil": 1, "rn": 0}


def _scalar(dtype: str):
    key = str(dtype).lower()
    if key not in _SCALAR:
        raise _capi.InvalidArgumentError(
            1, f"b12x.formats: dtype={dtype!r} has no scalar codec "
               "(supported: e4m3, e5m2, e2m1, ue8m0, ue4m3, bf16, fp16)")
    return _SCALAR[key]


def encode_scalar(dtype: str, x, mode: str = "satfinite") -> np.ndarray:
    """float32 -> codes (uint8; uint16 bit patterns for bf16/fp16; E2M1 one code per byte).
    mode: "satfinite" / "nosat" for E4M3/E5M2, "rz" (floor) / "rp" (ceil) for UE8M0."""
    code, width = _scalar(dtype)
    if mode not in _MODES:
        raise _capi.InvalidArgumentError(1, f"b12x.formats: mode={mode!r} (supported: "
                                            f"{', '.join(_MODES)})")
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    out = np.empty(a.shape, dtype=np.uint8 if width == 1 else np.uint16)
    _capi.call("b12x_encode_scalar", code, _MODES[mode], a.ctypes.data, out.ctypes.data, a.size)
    return out


def decode_scalar(dtype: str, codes) -> np.ndarray:
    code, width = _scalar(dtype)
    c = np.asarray(codes)
    if c.dtype.itemsize != width:
        raise _capi.InvalidArgumentError(
            1, f"b12x.formats: codes for {dtype} must be {width}-byte, got {c.dtype}")
    c = np.ascontiguousarray(c.view(np.uint8 if width == 1 else np.uint16))
    out = np.empty(c.shape, dtype=np.float32)
    _capi.call("b12x_decode_scalar", code, c.ctypes.data, out.ctypes.data, c.size)
    return out


# ---------------------------------------------------------------- swizzle ------------------
def swizzle_block_scale(scale, pad: int = 0):
    """128x4 MMA layout of a 2-D/3-D scale grid (numpy via the C ABI, torch via torch ops);
    see b12x._lib.intrinsics.swizzle_block_scale. ``pad``: 0 for NVFP4, 127 for MX."""
    from ._lib import intrinsics
    return intrinsics.swizzle_block_scale(scale, pad=pad)


def unswizzle_block_scale(scale, rows: int, cols: int):
    from ._lib import intrinsics
    return intrinsics.unswizzle_block_scale(scale, rows, cols)
