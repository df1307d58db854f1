"""``b12x.gemm.blockscaled``: one-shot block-scaled GEMMs with the signatures vLLM calls.

* ``mm_nvfp4(a_fp4 u8[M,K/2], a_sf e4m3 swizzled, b_fp4 u8[N,K/2], b_sf e4m3 swizzled, alpha
  f32[1], *, out_dtype=torch.bfloat16, expected_m=None, stream=None) -> [M, N]``
* ``mm_mxfp4(a_fp4, a_sf e8m0 swizzled, b_fp4, b_sf e8m0 swizzled, *, out_dtype, ...)``
* ``mm_block_fp8(a e4m3 [M,K], a_scale f32 [M,K/128], b e4m3 [N,K], b_scale f32 [ceil(N/128),
  K/128], *, out_dtype, ...)``

The weight operand (b, b_sf) is packed into the b12x layout on first use and cached per storage
(data pointer, shape, dtype); an in-place update of the storage (torch ``_version`` change)
refreshes the packed copy. Warm every shape before capture. numpy inputs run the fp64 CPU
reference and return float64.
"""

from __future__ import annotations

import threading
from typing import Dict, Tuple

from .. import _capi, _torch_ops
from . import _linear

__all__ = ["mm_nvfp4", "mm_mxfp4", "mm_block_fp8", "is_supported"]

is_supported = _linear.is_supported

_CACHE: Dict[Tuple, Tuple[Tuple, "_linear.PackedWeight"]] = {}
_LOCK = threading.Lock()


def _version(t) -> int:
    return int(getattr(t, "_version", 0))


def _packed_for(fmt: str, b, b_sf, swizzled: bool):
    key = (fmt, b.device.index, b.data_ptr(), tuple(b.shape), str(b.dtype), b_sf.data_ptr(),
           tuple(b_sf.shape), str(b_sf.dtype))
    ver = (_version(b), _version(b_sf))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] == ver:
        return hit[1]
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[0] == ver:
            return hit[1]
        if _linear._is_capturing():
            raise _capi.CaptureActiveError(
                6, f"b12x.gemm.blockscaled: weight {tuple(b.shape)} not packed (or changed) during "
                   f"capture; run the layer once before capturing")
        if hit is not None:
            hit[1].refresh(b, b_sf)
            packed = hit[1]
        else:
            packed = _linear.pack_weight(fmt, b, b_sf, scale_swizzled=swizzled)
        _CACHE[key] = (ver, packed)
        return packed


def _gpu_mm(fmt, a, a_sf, b, b_sf, alpha, out):
    packed = _packed_for(fmt, b, b_sf, fmt != "fp8_block")
    _linear.run_linear_out(a, a_sf, packed, None, alpha, out)


def _register() -> None:
    if not _torch_ops.torch_available():
        return

    def _fake(a, a_sf, b, b_sf, alpha, out):
        return None

    for name, fmt in (("gemm_mm_nvfp4", "nvfp4"), ("gemm_mm_mxfp4", "mxfp4"),
                      ("gemm_mm_block_fp8", "fp8_block")):
        def impl(a, a_sf, b, b_sf, alpha, out, _fmt=fmt):
            _gpu_mm(_fmt, a, a_sf, b, b_sf, alpha, out)
        _torch_ops.register_op(
            name, "(Tensor a, Tensor a_sf, Tensor b, Tensor b_sf, Tensor? alpha, Tensor(a!) out) -> ()",
            impl, _fake)


_register()


def _alpha_float(alpha) -> float:
    if alpha is None:
        return 1.0
    if isinstance(alpha, (int, float)):
        return float(alpha)
    import numpy as np
    return float(np.asarray(alpha).reshape(-1)[0])


def _mm(fmt, opname, a, a_sf, b, b_sf, alpha, out_dtype, ref_kw):
    if not _capi.is_torch_tensor(a):
        return _linear.reference_linear(fmt, b, b_sf, a, x_scale=a_sf, alpha=_alpha_float(alpha),
                                         **ref_kw)
    import torch
    if out_dtype is None:
        out_dtype = torch.bfloat16
    out = torch.empty((a.shape[0], b.shape[0]), dtype=out_dtype, device=a.device)
    if opname in _torch_ops._REGISTERED:
        _torch_ops.op(opname)(a, a_sf, b, b_sf, alpha, out)
    else:
        _gpu_mm(fmt, a, a_sf, b, b_sf, alpha, out)
    return out


def mm_nvfp4(lhs_values, lhs_scale_storage, rhs_values, rhs_scale_storage, alpha, *,
             out_dtype=None, expected_m=None, stream=None):
    """NVFP4 W4A4: ``alpha * (A . SFA) (B . SFB)^T``; scales in the 128x4 layout."""
    return _mm("nvfp4", "gemm_mm_nvfp4", lhs_values, lhs_scale_storage, rhs_values,
               rhs_scale_storage, alpha, out_dtype, {"scale_swizzled": True})


def mm_mxfp4(lhs_values, lhs_scale_storage, rhs_values, rhs_scale_storage, *, alpha=None,
             out_dtype=None, expected_m=None, stream=None):
    """MXFP4 W4A4 (E8M0 vec-32 scales in the 128x4 layout, no alpha by default)."""
    return _mm("mxfp4", "gemm_mm_mxfp4", lhs_values, lhs_scale_storage, rhs_values,
               rhs_scale_storage, alpha, out_dtype, {"scale_swizzled": True})


def mm_block_fp8(a, a_scale, b, b_scale, *, out_dtype=None, expected_m=None, stream=None):
    """DeepSeek block FP8: per-128-block fp32 scales of both operands applied in fp32."""
    return _mm("fp8_block", "gemm_mm_block_fp8", a, a_scale, b, b_scale, None, out_dtype, {})
