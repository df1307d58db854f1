"""Activation quantisers: ctypes declarations, numpy (CPU reference) and torch (GPU) paths.

Every quantiser has an out-variant ``<name>_out(x, ..., outputs...)`` that writes caller-provided
buffers and allocates nothing (capture-safe for CUDA tensors), and a functional form
``<name>(x, ...)`` that allocates the outputs and returns them.

* numpy inputs (``np.uint16`` = bf16 bit patterns, ``np.float16``) run the CPU reference
  (``b12x_ref_quantize_*``), which is bit-identical to the GPU kernels;
* torch CUDA inputs (bf16/fp16) run the GPU kernels on the current stream; the same bodies are
  registered as the ``torch.ops.b12x.quantize_*`` custom ops (out-variant schemas, fake
  implementations for tracing).

Layouts (see ``include/b12x/quantize.h``): ``x`` is ``[M, K]`` (leading dims are flattened by the
functional forms); FP4 outputs are packed uint8 ``[M, K/2]`` (element 2i in the low nibble);
swizzled scale grids are uint8 ``[pad128(M), pad4(K/B)]`` in the 128x4 tensor-core layout with
padding 0 (NVFP4) / 127 (MX); row-major MXFP8 scales are uint8 ``[M, K/32]`` (E8M0 bytes);
FP8 values are uint8/float8_e4m3fn ``[M, K]``; 1x128 group scales are fp32 ``[M, K/128]``.
"""

from __future__ import annotations

import ctypes
from typing import Optional, Tuple

import numpy as np

from .. import _capi, _torch_ops

_T = _capi.TensorP
_S = ctypes.c_void_p
_capi.declare("b12x_swizzled_scale_bytes", [ctypes.c_int64, ctypes.c_int64,
                                            ctypes.POINTER(ctypes.c_int64)])
_capi.declare("b12x_quantize_nvfp4", [_T, _T, _T, _T, _S])
_capi.declare("b12x_quantize_mxfp8", [_T, _T, _T, _T, _S])
_capi.declare("b12x_quantize_mxfp4", [_T, _T, _T, _S])
_capi.declare("b12x_quantize_fp8_tensor", [_T, _T, _T, _S])
_capi.declare("b12x_quantize_fp8_group128", [_T, _T, _T, _S])
_capi.declare("b12x_ref_quantize_nvfp4", [_T, ctypes.c_float, _T, _T])
_capi.declare("b12x_ref_quantize_mxfp8", [_T, _T, _T, _T])
_capi.declare("b12x_ref_quantize_mxfp4", [_T, _T, _T])
_capi.declare("b12x_ref_quantize_fp8_tensor", [_T, ctypes.c_float, _T])
_capi.declare("b12x_ref_quantize_fp8_group128", [_T, _T, _T])


def pad_to(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def swizzled_shape(rows: int, cols: int) -> Tuple[int, int]:
    """Shape of a 128x4-swizzled scale grid for ``[rows, cols]`` logical scales."""
    return pad_to(rows, 128), pad_to(cols, 4)


def _is_torch(x) -> bool:
    return _capi.is_torch_tensor(x)


def _as_2d(x, name="x"):
    if x.ndim < 1:
        raise _capi.InvalidArgumentError(1, f"b12x.quantization: {name} must have at least 1 dim")
    if x.ndim == 2:
        return x
    return x.reshape(-1, x.shape[-1])


def _scalar_float(v, name: str) -> float:
    if isinstance(v, (float, int)):
        return float(v)
    if isinstance(v, np.ndarray):
        if v.size != 1:
            raise _capi.InvalidArgumentError(1, f"b12x.quantization: {name} must hold one value")
        return float(v.reshape(-1)[0])
    if _is_torch(v):
        if v.is_cuda:
            raise _capi.InvalidArgumentError(
                1, f"b12x.quantization: {name} is a CUDA tensor but x is a host array")
        return float(v.reshape(-1)[0].item())
    raise _capi.InvalidArgumentError(1, f"b12x.quantization: {name} must be a float or a "
                                        f"one-element array, got {type(v).__name__}")


def _device_scalar(v, like, name: str):
    """A float32 [1] CUDA tensor on like's device (a Python float is copied to the device)."""
    import torch
    if _is_torch(v):
        return v
    return torch.full((1,), float(v), dtype=torch.float32, device=like.device)


def _stream(x):
    return _capi.stream_of(x)


# ---- GPU implementations (also the bodies of the torch custom ops) -----------------------------
def _gpu_nvfp4(x, gs, packed, sf):
    _capi.call("b12x_quantize_nvfp4", _capi.ref(x, name="x"), _capi.ref(gs, name="global_scale"),
               _capi.ref(packed, name="packed"), _capi.ref(sf, name="scale_swizzled"), _stream(x))


def _gpu_mxfp8(x, values, sr, sw):
    _capi.call("b12x_quantize_mxfp8", _capi.ref(x, name="x"), _capi.ref(values, name="values"),
               _capi.ref(sr, name="scale_rows"), _capi.ref(sw, name="scale_swizzled"), _stream(x))


def _gpu_mxfp4(x, packed, sw):
    _capi.call("b12x_quantize_mxfp4", _capi.ref(x, name="x"), _capi.ref(packed, name="packed"),
               _capi.ref(sw, name="scale_swizzled"), _stream(x))


def _gpu_fp8t(x, scale, values):
    _capi.call("b12x_quantize_fp8_tensor", _capi.ref(x, name="x"), _capi.ref(scale, name="scale"),
               _capi.ref(values, name="values"), _stream(x))


def _gpu_fp8g(x, values, scales):
    _capi.call("b12x_quantize_fp8_group128", _capi.ref(x, name="x"),
               _capi.ref(values, name="values"), _capi.ref(scales, name="scales"), _stream(x))


# ---- out variants (no allocation) -------------------------------------------------------------
def quantize_nvfp4_out(x, global_scale, packed, scale_swizzled) -> None:
    """NVFP4 into ``packed`` (M*K/2 bytes) and ``scale_swizzled`` (pad128(M)*pad4(K/16) bytes).

    ``global_scale``: numpy path a float (multiply convention, e.g. 448*6/amax); torch path a
    float32 [1] CUDA tensor (read on the device at run time, so graphs see updates)."""
    if _is_torch(x) and x.is_cuda:
        _gpu_nvfp4(x, global_scale, packed, scale_swizzled)
        return
    _capi.call("b12x_ref_quantize_nvfp4", _capi.ref(x, name="x"),
               _scalar_float(global_scale, "global_scale"), _capi.ref(packed, name="packed"),
               _capi.ref(scale_swizzled, name="scale_swizzled"))


def quantize_mxfp8_out(x, values, scale_rows=None, scale_swizzled=None) -> None:
    """MXFP8 into ``values`` [M, K] and ``scale_rows`` [M, K/32] and/or ``scale_swizzled``."""
    if _is_torch(x) and x.is_cuda:
        _gpu_mxfp8(x, values, scale_rows, scale_swizzled)
        return
    _capi.call("b12x_ref_quantize_mxfp8", _capi.ref(x, name="x"), _capi.ref(values, name="values"),
               _capi.ref(scale_rows, name="scale_rows"),
               _capi.ref(scale_swizzled, name="scale_swizzled"))


def quantize_mxfp4_out(x, packed, scale_swizzled) -> None:
    """MXFP4 (ceil scale rule) into ``packed`` and ``scale_swizzled`` (pad128(M)*pad4(K/32))."""
    if _is_torch(x) and x.is_cuda:
        _gpu_mxfp4(x, packed, scale_swizzled)
        return
    _capi.call("b12x_ref_quantize_mxfp4", _capi.ref(x, name="x"), _capi.ref(packed, name="packed"),
               _capi.ref(scale_swizzled, name="scale_swizzled"))


def quantize_fp8_per_tensor_out(x, scale, values) -> None:
    """``values = e4m3_satfinite(x / scale)``; torch path: ``scale`` float32 [1] CUDA tensor."""
    if _is_torch(x) and x.is_cuda:
        _gpu_fp8t(x, scale, values)
        return
    _capi.call("b12x_ref_quantize_fp8_tensor", _capi.ref(x, name="x"),
               _scalar_float(scale, "scale"), _capi.ref(values, name="values"))


def quantize_fp8_group128_out(x, values, scales) -> None:
    """FP8 with 1x128 groups: ``values`` [M, K], ``scales`` fp32 [M, K/128] (amax/448)."""
    if _is_torch(x) and x.is_cuda:
        _gpu_fp8g(x, values, scales)
        return
    _capi.call("b12x_ref_quantize_fp8_group128", _capi.ref(x, name="x"),
               _capi.ref(values, name="values"), _capi.ref(scales, name="scales"))


# ---- functional forms --------------------------------------------------------------------------
def _empty(like, shape, kind: str):
    """uint8 / float32 output on like's device (numpy for numpy inputs)."""
    if _is_torch(like):
        import torch
        dt = {"u8": torch.uint8, "f32": torch.float32}[kind]
        return torch.empty(shape, dtype=dt, device=like.device)
    return np.empty(shape, dtype={"u8": np.uint8, "f32": np.float32}[kind])


def _check_k(k: int, block: int, what: str) -> None:
    if k % block != 0:
        raise _capi.InvalidArgumentError(
            1, f"b12x.quantization.{what}: K={k} is not a multiple of {block}")


def quantize_nvfp4(x, global_scale):
    """Returns ``(packed uint8 [M, K/2], scale_swizzled uint8 [pad128(M), pad4(K/16)])``."""
    x2 = _as_2d(x)
    m, k = x2.shape
    _check_k(k, 16, "quantize_nvfp4")
    packed = _empty(x2, (m, k // 2), "u8")
    sf = _empty(x2, swizzled_shape(m, k // 16), "u8")
    gs = _device_scalar(global_scale, x2, "global_scale") if (_is_torch(x2) and x2.is_cuda) \
        else global_scale
    quantize_nvfp4_out(x2, gs, packed, sf)
    return packed, sf


def quantize_mxfp8(x, *, rows: bool = True, swizzled: bool = True):
    """Returns ``(values [M, K], scale_rows [M, K/32] or None, scale_swizzled or None)``."""
    x2 = _as_2d(x)
    m, k = x2.shape
    _check_k(k, 32, "quantize_mxfp8")
    if not rows and not swizzled:
        raise _capi.InvalidArgumentError(1, "b12x.quantization.quantize_mxfp8: rows and swizzled "
                                            "are both False (at least one scale output is needed)")
    values = _empty(x2, (m, k), "u8")
    sr = _empty(x2, (m, k // 32), "u8") if rows else None
    sw = _empty(x2, swizzled_shape(m, k // 32), "u8") if swizzled else None
    quantize_mxfp8_out(x2, values, sr, sw)
    return values, sr, sw


def quantize_mxfp4(x):
    """Returns ``(packed uint8 [M, K/2], scale_swizzled uint8 [pad128(M), pad4(K/32)])``."""
    x2 = _as_2d(x)
    m, k = x2.shape
    _check_k(k, 32, "quantize_mxfp4")
    packed = _empty(x2, (m, k // 2), "u8")
    sw = _empty(x2, swizzled_shape(m, k // 32), "u8")
    quantize_mxfp4_out(x2, packed, sw)
    return packed, sw


def quantize_fp8_per_tensor(x, scale):
    """Returns uint8 e4m3 codes ``[M, K]`` of ``x / scale`` (saturating)."""
    x2 = _as_2d(x)
    values = _empty(x2, tuple(x2.shape), "u8")
    s = _device_scalar(scale, x2, "scale") if (_is_torch(x2) and x2.is_cuda) else scale
    quantize_fp8_per_tensor_out(x2, s, values)
    return values


def quantize_fp8_group128(x):
    """Returns ``(values uint8 [M, K], scales float32 [M, K/128])``."""
    x2 = _as_2d(x)
    m, k = x2.shape
    _check_k(k, 128, "quantize_fp8_group128")
    values = _empty(x2, (m, k), "u8")
    scales = _empty(x2, (m, k // 128), "f32")
    quantize_fp8_group128_out(x2, values, scales)
    return values, scales


# ---- torch custom ops (out-variant schemas; the fake impls only describe "no outputs") --------
# Eager Python calls use the _gpu_* functions directly (exceptions keep their b12x types); the
# registered ops torch.ops.b12x.quantize_* are for torch.compile / custom-op users. The MXFP8 op
# takes both scale outputs (the out-variant Python function accepts None for either).
def _register() -> None:
    if not _torch_ops.torch_available():
        return

    def _noop(*args):
        return None

    _torch_ops.register_op(
        "quantize_nvfp4",
        "(Tensor x, Tensor global_scale, Tensor(a!) packed, Tensor(b!) scale_swizzled) -> ()",
        _gpu_nvfp4, _noop)
    _torch_ops.register_op(
        "quantize_mxfp8",
        "(Tensor x, Tensor(a!) values, Tensor(b!) scale_rows, Tensor(c!) scale_swizzled) -> ()",
        _gpu_mxfp8, _noop)
    _torch_ops.register_op(
        "quantize_mxfp4", "(Tensor x, Tensor(a!) packed, Tensor(b!) scale_swizzled) -> ()",
        _gpu_mxfp4, _noop)
    _torch_ops.register_op(
        "quantize_fp8_tensor", "(Tensor x, Tensor scale, Tensor(a!) values) -> ()", _gpu_fp8t,
        _noop)
    _torch_ops.register_op(
        "quantize_fp8_group128", "(Tensor x, Tensor(a!) values, Tensor(b!) scales) -> ()",
        _gpu_fp8g, _noop)


_register()
