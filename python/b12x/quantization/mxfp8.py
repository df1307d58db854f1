"""MXFP8 row quantisation with the b12x ``mxfp8.quantize_rows`` surface.

``quantize_rows(source, values, scale_rows, scale_mma, *, value_order="linear")``: ``source``
bf16/fp16 ``[M, K]`` (K % 32), writes E4M3 ``values [M, K]``, row-major E8M0 ``scale_rows
[M, K/32]`` and the 128x4-swizzled ``scale_mma`` (pad128(M) * pad4(K/32) bytes; either scale
output may be None). Unlike the original, the padding of ``scale_mma`` is written too (byte 127),
so no pre-fill is needed. Scale rule: pow2-ceil(amax/448), all-zero block 127.
``quantize(x)`` is the functional form returning ``(values, scale_rows, scale_mma)``.
"""

from __future__ import annotations

from .. import _capi
from ._ops import quantize_mxfp8 as quantize, quantize_mxfp8_out  # noqa: F401

__all__ = ["quantize_rows", "quantize"]


def quantize_rows(source, values, scale_rows, scale_mma, *, value_order: str = "linear") -> None:
    if value_order != "linear":
        raise _capi.UnsupportedError(
            2, f"b12x.quantization.mxfp8.quantize_rows: value_order={value_order!r} "
               f"(supported: 'linear')")
    quantize_mxfp8_out(source, values, scale_rows, scale_mma)
